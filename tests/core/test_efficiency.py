"""Efficiency as fractions of what Slurm allocated; unknown is None, never 0. The sacct facts come
from recorded real output (tests/fixtures/sacct/array_completed.txt: AllocTRES `cpu=1,…,mem=200M`,
Elapsed 00:00:05, the `.0` step's MaxRSS 23832K)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.core.model.sacct_values import rss_mb
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.slurm.sacct import observe_jobs
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.cost import parse_alloc_tres
from campaignctl.core.usage.efficiency import (
    AttemptUse,
    Efficiency,
    attempt_efficiency,
    campaign_efficiency,
    cells,
    efficiency_text,
    task_efficiency,
)
from campaignctl.core.usage.telemetry import Summary, fold

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
PRICES = Prices(gpu_hour={"a100": 3.0}, cpu_hour=0.5)


def telemetry(cpu: float, rss: float = 100.0, gpus: list[dict[str, float]] | None = None, n: int = 3) -> Summary:
    start = json.dumps({"event": "start", "t": 0, "interval_s": 1, "nvml": "ok" if gpus else "no GPU"})
    return fold(Summary(), [start, *(json.dumps({"t": i, "cpu_pct": cpu, "rss_mb": rss, "nproc": 2, "gpus": gpus or []})
                                     for i in range(n))])


def recorded(index: int) -> AttemptUse:
    """Element `index` of the real array (1 CPU, 1 a100, 200M, 5 min limit)."""
    obs = observe_jobs((FIXTURES / "array_completed.txt").read_text())[("5", index)]
    return AttemptUse(obs.state.value, obs.elapsed_s, Resources(gpus=1, gpu_type="a100", mem_mb=200, time_min=5),
                      obs.alloc_tres, obs.max_rss)


def test_recorded_sacct_facts_give_memory_and_time_efficiency_and_cost() -> None:
    use = recorded(0)
    assert (use.elapsed_s, use.max_rss) == (5, "23832K")
    e = attempt_efficiency(use, PRICES)
    assert e.time == pytest.approx(5 / 300)
    assert e.mem == pytest.approx(23832 / 1024 / 200)  # peak RSS ÷ AllocTRES mem=200M
    assert e.gpu_hours == pytest.approx(5 / 3600) and e.cost == pytest.approx((3.0 + 0.5) * 5 / 3600)
    assert (e.cpu, e.gpu_util, e.gpu_mem, e.gpu_mem_peak_mb) == (None, None, None, None)  # no telemetry: unknown
    assert cells(e)[:5] == ("-", "12%", "2%", "-", "-")


def test_alloc_tres_memory_is_read_in_megabytes() -> None:
    assert parse_alloc_tres("billing=2,cpu=2,gres/gpu=1,mem=4G,node=1").mem_mb == 4096  # type: ignore[union-attr]
    assert parse_alloc_tres("cpu=1,node=1").mem_mb is None  # type: ignore[union-attr]
    assert rss_mb("23832K") == pytest.approx(23.27, abs=0.01) and rss_mb("") is None


@pytest.mark.parametrize(("alloc_tres", "cpu_pct", "expected"), [
    ("cpu=2,mem=1000M,node=1", 150.0, 0.75),  # 1.5 cores busy of the 2 Slurm allocated
    ("cpu=4,mem=1000M,node=1", 150.0, 0.375),  # Slurm gave more cores than asked: its figure counts
    ("", 150.0, 0.75),  # not allocated yet: the 2 asked for
])
def test_cpu_is_a_fraction_of_the_allocated_cores_not_of_one_core(alloc_tres: str, cpu_pct: float,
                                                                  expected: float) -> None:
    use = AttemptUse("RUNNING", 60, Resources(cpus_per_task=2, mem_mb=1000), alloc_tres, "", telemetry(cpu_pct))
    assert attempt_efficiency(use, PRICES).cpu == pytest.approx(expected)


def test_peak_rss_is_the_larger_of_sacct_and_the_sampler() -> None:
    use = AttemptUse("COMPLETED", 60, Resources(mem_mb=1000), "cpu=1,mem=1000M", "300M", telemetry(50, rss=450.0))
    assert attempt_efficiency(use, PRICES).mem == pytest.approx(0.45)
    assert attempt_efficiency(AttemptUse("COMPLETED", 60, Resources(mem_mb=1000), "cpu=1,mem=1000M", "300M"),
                              PRICES).mem == pytest.approx(0.3)


def test_memory_is_the_cgroup_peak_where_the_sampler_read_one_even_below_summed_rss() -> None:
    # four forked workers sharing 300M: summed RSS 1500M of a 1000M allocation, never OOM-killed
    start = json.dumps({"event": "start", "t": 0, "interval_s": 1, "nvml": "no GPU", "cgroup_mem_limit_mb": 1000.0})
    lines = [start, *(json.dumps({"t": i, "cpu_pct": 90, "rss_mb": 1500.0, "nproc": 5, "cgroup_mem_peak_mb": 310.0 + i,
                                  "gpus": []}) for i in range(3)),
             json.dumps({"t": 3, "cpu_pct": 0, "rss_mb": 0, "nproc": 0, "cgroup_mem_peak_mb": 340.0, "gpus": []})]
    use = AttemptUse("COMPLETED", 60, Resources(mem_mb=1000), "cpu=1,mem=1000M", "1500M", fold(Summary(), lines))
    e = attempt_efficiency(use, PRICES)
    assert (e.mem, e.mem_source, e.mem_peak_mb, e.rss_peak_mb) == (pytest.approx(0.34), "cgroup", 340.0, 1500.0)
    without = attempt_efficiency(AttemptUse("COMPLETED", 60, Resources(mem_mb=1000), "cpu=1,mem=1000M", "1500M"),
                                 PRICES)
    assert (without.mem, without.mem_source) == (pytest.approx(1.5), "rss")  # no cgroup read: what RSS says
    both = campaign_efficiency([use, AttemptUse("COMPLETED", 60, Resources(mem_mb=1000), "cpu=1,mem=1000M", "500M")],
                               PRICES)
    assert both.mem_source == "cgroup+rss" and both.mem == pytest.approx((0.34 + 0.5) / 2)


def test_gpu_utilisation_and_memory_peak_from_nvml_samples() -> None:
    gpus = [{"index": 0, "util_pct": 80.0, "mem_used_mb": 10240.0, "mem_total_mb": 40960.0},
            {"index": 1, "util_pct": 40.0, "mem_used_mb": 20480.0, "mem_total_mb": 40960.0}]
    use = AttemptUse("RUNNING", 60, Resources(gpus=2, gpu_type="a100"), "cpu=1,gres/gpu=2,mem=1G", "",
                     telemetry(90, gpus=gpus))
    e = attempt_efficiency(use, PRICES)
    assert e.gpu_util == pytest.approx(0.6) and e.gpu_mem == pytest.approx(30720 / 81920)
    assert e.gpu_mem_peak_mb == 30720.0 and cells(e)[4] == "38% (30.0G)"


@pytest.mark.parametrize(("use", "why"), [
    (AttemptUse("PENDING", None, Resources()), "pending: nothing ran"),
    (AttemptUse("PENDING", 0, Resources()), "pending with sacct's 00:00:00"),
    (AttemptUse("UNKNOWN", None, Resources()), "ended but sacct never gave an elapsed time"),
])
def test_what_was_not_measured_is_none_never_zero(use: AttemptUse, why: str) -> None:
    e = attempt_efficiency(use, PRICES)
    assert (e.cpu, e.mem, e.time, e.gpu_util, e.gpu_hours, e.cost) == (None,) * 6, why
    assert set(cells(e)) == {"-"}


def test_a_cpu_only_task_has_no_gpu_figures_even_with_telemetry() -> None:
    e = attempt_efficiency(AttemptUse("COMPLETED", 10, Resources(), "cpu=1,mem=1G", "", telemetry(100)), PRICES)
    assert e.cpu == pytest.approx(1.0) and (e.gpu_util, e.gpu_mem, e.gpu_mem_peak_mb) == (None, None, None)
    assert e.gpu_hours == 0.0  # known: no GPU was allocated


def test_a_task_shows_its_latest_run_and_the_cost_of_every_attempt() -> None:
    oom = AttemptUse("OUT_OF_MEMORY", 600, Resources(mem_mb=1000, time_min=60), "cpu=1,mem=1000M", "1000M")
    retry = AttemptUse("COMPLETED", 1800, Resources(mem_mb=1500, time_min=60), "cpu=1,mem=1500M", "1200M")
    e = task_efficiency([oom, retry], PRICES)
    assert e.mem == pytest.approx(0.8) and e.time == pytest.approx(0.5)
    assert e.cost == pytest.approx(0.5 * (600 + 1800) / 3600)
    assert task_efficiency([retry, AttemptUse("PENDING", None, retry.resources)], PRICES).time == pytest.approx(0.5)
    assert task_efficiency([], PRICES) == Efficiency()


def test_campaign_figures_are_weighted_by_what_each_attempt_held_for_how_long() -> None:
    short = AttemptUse("COMPLETED", 600, Resources(cpus_per_task=1, time_min=60), "cpu=1,mem=1000M", "", telemetry(100))
    wide = AttemptUse("COMPLETED", 1800, Resources(cpus_per_task=4, time_min=60), "cpu=4,mem=1000M", "", telemetry(100))
    pending = AttemptUse("PENDING", None, Resources(time_min=600))
    e = campaign_efficiency([short, wide, pending], PRICES)
    # used core-seconds (600 × 1 + 1800 × 1) ÷ allocated (600 × 1 + 1800 × 4)
    assert e.cpu == pytest.approx(2400 / 7800)
    assert e.time == pytest.approx(2400 / 7200)  # the pending attempt's limit is not counted
    assert e.mem == pytest.approx(0.1)  # both peaked at the sampler's 100 MB of 1000M
    assert e.gpu_util is None and e.gpu_mem is None  # no GPU was sampled: unknown, not 0 %
    assert campaign_efficiency([pending], PRICES) == Efficiency()
    assert efficiency_text(e).startswith("cpu 31%, mem 10%, time 33%, gpu -, gpu mem -")


def test_a_maxrss_that_counts_page_cache_does_not_make_a_streaming_task_memory_bound() -> None:
    """sacct's MaxRSS of 146 MB under a 150M limit (Slurm 24.11, jobacct_gather/cgroup, cgroup v1,
    a task that streamed a file: tests/integration/test_cgroup_memory_real.py), the sampler's RSS
    14 MB while it read 900 MB/s mostly in the kernel: I/O-bound, not memory-bound."""
    streaming = Summary(samples=10, cpu_sum=10 * 95.0, cpu_sys_samples=10, cpu_sys_sum=10 * 80.0, rss_max_mb=14.0,
                        interval_s=1.0, io_read_mb=9000.0, io_s=10.0)
    use = AttemptUse("COMPLETED", 10, Resources(cpus_per_task=1, mem_mb=150), max_rss="149504K", telemetry=streaming)
    e = attempt_efficiency(use, Prices())
    assert e.bottleneck == "io" and e.rss_peak_mb == 146.0
