"""The bottleneck label of an attempt from its telemetry summary, at the stated thresholds."""

from __future__ import annotations

from dataclasses import replace

from campaignctl.core.usage.bottleneck import IO_MBPS, bottleneck
from campaignctl.core.usage.telemetry import Summary

TEN_S = Summary(samples=10, cpu_sum=10 * 95.0, cpu_sys_samples=10, cpu_sys_sum=10 * 5.0, interval_s=1.0)


def io(summary: Summary, mbps: float) -> Summary:
    return replace(summary, io_read_mb=mbps * 10, io_s=10.0)


def label(summary: Summary | None, cores: float = 1, mem_mb: float = 1000, gpus: float = 0,
          rss_mb: float | None = 100) -> str | None:
    found = bottleneck(summary, cores, mem_mb, gpus, rss_mb)
    return None if found is None else found.label


def test_a_spinner_is_compute_a_sleeper_idle_and_no_telemetry_no_label() -> None:
    assert label(io(TEN_S, 0.0)) == "compute"
    assert label(replace(TEN_S, cpu_sum=10 * 0.5, cpu_sys_sum=10 * 0.2)) == "idle"
    assert label(None) is None and label(Summary()) is None


def test_a_cpu_task_streaming_through_the_kernel_is_io_and_one_computing_on_its_data_is_not() -> None:
    cat = replace(io(TEN_S, 900.0), cpu_sys_sum=10 * 80.0)  # a cat from the page cache: kernel time
    assert label(cat) == "io"
    trainer = io(replace(TEN_S, cpu_sum=10 * 790.0), 100.0)  # 8 busy cores in their own code, 100 MB/s in
    assert label(trainer, cores=8) == "compute"
    waiting = io(replace(TEN_S, cpu_sum=10 * 150.0), 60.0)  # 1.5 of 8 cores busy while it reads
    assert label(waiting, cores=8) == "io"
    assert label(io(replace(TEN_S, cpu_sum=10 * 150.0), IO_MBPS - 1), cores=8) == "compute"


def test_a_gpu_task_is_io_while_its_gpus_starve_and_compute_while_they_are_busy() -> None:
    starving = replace(io(TEN_S, 200.0), gpu_samples=10, gpu_util_sum=10 * 20.0)
    busy = replace(starving, gpu_util_sum=10 * 97.0)
    assert label(starving, gpus=1) == "io" and label(busy, gpus=1) == "compute"
    found = bottleneck(starving, 8, 16000, 1, 100)
    assert found is not None and "200 MB/s of I/O while its GPUs were 20 % utilised" in found.why


def test_memory_is_the_processes_own_near_their_limit_not_page_cache() -> None:
    assert label(TEN_S, mem_mb=1000, rss_mb=950) == "memory"
    cached = replace(io(TEN_S, 900.0), cpu_sys_sum=10 * 80.0, cgroup_mem_peak_mb=990.0)  # the cgroup full of cache
    assert label(cached, mem_mb=1000, rss_mb=30) == "io"


def test_gpus_waiting_on_each_other_over_nvlink_are_communication_bound() -> None:
    talking = replace(TEN_S, gpu_samples=10, gpu_util_sum=10 * 30.0, nvlink_mb=30_000.0, nvlink_s=10.0)
    assert label(talking, gpus=8) == "communication"
    assert label(replace(talking, gpu_util_sum=10 * 90.0), gpus=8) == "compute"  # busy while they talk
    assert label(replace(talking, nvlink_mb=500.0), gpus=8) == "compute"  # 50 MB/s: not what holds them


def test_a_multi_node_task_waiting_on_its_network_is_communication_bound() -> None:
    # Gloo all-reduce over TCP, measured on this machine: ~75 % of a core per rank, 60 of it in the kernel
    ranks = replace(io(TEN_S, 900.0), cpu_sum=10 * 150.0, cpu_sys_sum=10 * 120.0, net_mb=9000.0, net_s=10.0)
    assert label(ranks, cores=4) == "communication"
    found = bottleneck(ranks, 4, 3000, 0, 100)
    assert found is not None and found.why.startswith("900 MB/s through its node's network while it used 150 %")
    assert label(replace(ranks, net_mb=500.0), cores=4) == "io"  # 50 MB/s: its sockets, not its network
    gpus = replace(ranks, gpu_samples=10, gpu_util_sum=10 * 95.0)
    assert label(gpus, cores=4, gpus=8) == "compute"  # the GPUs busy while the network carries their data
    assert label(replace(gpus, gpu_util_sum=10 * 20.0), cores=4, gpus=8) == "communication"
