"""The job-side telemetry sampler, with a fake `pynvml` at the NVML boundary and real processes.

The fake answers the pynvml calls the sampler makes, with pynvml's shapes: handles are opaque,
utilisation has `.gpu`, memory info `.used`/`.total` in bytes, power is in milliwatts, and
failures are `NVMLError` subclasses whose str() is NVML's error string.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from campaignctl.adapters.cgroup_memory import locate
from campaignctl.adapters.gpu_probe import visible_gpu_ids
from campaignctl.adapters.runner import run_task
from campaignctl.adapters.telemetry_sampler import ProcessTree, TelemetrySampler
from campaignctl.core.task_launch import TaskLaunch
from campaignctl.core.usage.telemetry import to_sample

GIB = 2**30


class NVMLError(Exception):
    text = "Unknown Error"

    def __str__(self) -> str:
        return self.text


class NVMLError_NotSupported(NVMLError):  # pynvml's class names
    text = "Not Supported"


class NVMLError_DriverNotLoaded(NVMLError):
    text = "Driver Not Loaded"


class NVMLError_InvalidArgument(NVMLError):
    text = "Invalid Argument"


class NVMLError_NotFound(NVMLError):
    text = "Not Found"


@dataclass
class FakeGpu:
    uuid: str
    util: int = 77
    mem_used: int = 1 * GIB
    mem_total: int = 40 * GIB
    power_mw: int = 250_000
    mig: bool = False  # a MIG device: utilisation and power are NotSupported, no NVML index
    failing: tuple[str, ...] = ()  # pynvml function names that raise NVMLError here
    processes: dict[int, int] | None = None  # pid → bytes, NVML's compute processes (None: no such call)
    pcie_kbs: tuple[int, int] | None = None  # (tx, rx) KB/s; None: no such call
    nvlink_kib_per_read: int | None = None  # each link's counters grow by this between reads; None: no NVLink
    nvlink_links: int = 2
    nvlink_reads: int = 0


def fake_pynvml(gpus: Sequence[FakeGpu], init_error: NVMLError | None = None) -> ModuleType:
    nvml = ModuleType("pynvml")
    calls: Counter[str] = Counter()
    physical = [gpu for gpu in gpus if not gpu.mig]

    def call(name: str, gpu: FakeGpu | None = None) -> None:
        calls[name] += 1
        if gpu is not None and name in gpu.failing:
            raise NVMLError()

    def init() -> None:
        call("nvmlInit")
        if init_error is not None:
            raise init_error

    def by_index(index: int) -> FakeGpu:
        call("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(physical):
            raise NVMLError_InvalidArgument()
        return physical[index]

    def by_uuid(uuid: str) -> FakeGpu:
        call("nvmlDeviceGetHandleByUUID")
        for gpu in gpus:
            if gpu.uuid == uuid:
                return gpu
        raise NVMLError_NotFound()

    def index_of(gpu: FakeGpu) -> int:
        call("nvmlDeviceGetIndex", gpu)
        if gpu.mig:
            raise NVMLError_NotSupported()
        return physical.index(gpu)

    def utilization(gpu: FakeGpu) -> SimpleNamespace:
        call("nvmlDeviceGetUtilizationRates", gpu)
        if gpu.mig:
            raise NVMLError_NotSupported()
        return SimpleNamespace(gpu=gpu.util, memory=10)

    def memory(gpu: FakeGpu) -> SimpleNamespace:
        call("nvmlDeviceGetMemoryInfo", gpu)
        return SimpleNamespace(used=gpu.mem_used, total=gpu.mem_total, free=gpu.mem_total - gpu.mem_used)

    def power(gpu: FakeGpu) -> int:
        call("nvmlDeviceGetPowerUsage", gpu)
        if gpu.mig:
            raise NVMLError_NotSupported()
        return gpu.power_mw

    def count() -> int:
        call("nvmlDeviceGetCount")
        return len(physical)

    def processes(gpu: FakeGpu) -> list[SimpleNamespace]:
        call("nvmlDeviceGetComputeRunningProcesses", gpu)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in (gpu.processes or {}).items()]

    def pcie(gpu: FakeGpu, counter: int) -> int:
        call("nvmlDeviceGetPcieThroughput", gpu)
        if gpu.pcie_kbs is None:
            raise NVMLError_NotSupported()
        return gpu.pcie_kbs[counter]

    def field_values(gpu: FakeGpu, fields: list[tuple[int, int]]) -> list[SimpleNamespace]:
        """pynvml's c_nvmlFieldValue_t, as read: fieldId, scopeId, nvmlReturn, value.ullVal."""
        call("nvmlDeviceGetFieldValues", gpu)
        gpu.nvlink_reads += 1
        have = gpu.nvlink_kib_per_read is not None
        return [SimpleNamespace(fieldId=field, scopeId=link,
                                nvmlReturn=0 if have and link < gpu.nvlink_links else 3,  # 3: NOT_SUPPORTED
                                value=SimpleNamespace(ullVal=gpu.nvlink_reads * (gpu.nvlink_kib_per_read or 0)))
                for field, link in fields]

    if any(gpu.pcie_kbs is not None or gpu.nvlink_kib_per_read is not None for gpu in gpus):
        nvml.__dict__.update(nvmlDeviceGetPcieThroughput=pcie, nvmlDeviceGetFieldValues=field_values,
                             NVML_PCIE_UTIL_TX_BYTES=0, NVML_PCIE_UTIL_RX_BYTES=1)
    nvml.__dict__.update(
        calls=calls, nvmlInit=init, nvmlShutdown=lambda: call("nvmlShutdown"), nvmlDeviceGetCount=count,
        nvmlDeviceGetHandleByIndex=by_index, nvmlDeviceGetHandleByUUID=by_uuid, nvmlDeviceGetIndex=index_of,
        nvmlDeviceGetUtilizationRates=utilization, nvmlDeviceGetMemoryInfo=memory, nvmlDeviceGetPowerUsage=power,
        NVMLError=NVMLError, NVMLError_NotSupported=NVMLError_NotSupported,
        NVMLError_DriverNotLoaded=NVMLError_DriverNotLoaded, NVMLError_InvalidArgument=NVMLError_InvalidArgument,
        NVMLError_NotFound=NVMLError_NotFound,
    )
    if any(gpu.processes is not None for gpu in gpus):
        nvml.__dict__["nvmlDeviceGetComputeRunningProcesses"] = processes
    return nvml


TWO_GPUS = [FakeGpu("GPU-aaaa", util=11, power_mw=100_000), FakeGpu("GPU-bbbb")]


@pytest.fixture
def install_nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[..., ModuleType]:
    def install(gpus: Sequence[FakeGpu] = TWO_GPUS, init_error: NVMLError | None = None) -> ModuleType:
        module = fake_pynvml(gpus, init_error)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module
    return install


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    yield child
    child.kill()
    child.wait()


def read_telemetry(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """(start, samples, end), checking what every telemetry file must satisfy."""
    text = path.read_text()
    assert text.endswith("\n")
    lines = [json.loads(line) for line in text.splitlines()]
    start, samples, end = lines[0], lines[1:-1], lines[-1]
    assert start["event"] == "start" and end["event"] == "end"
    assert all("event" not in sample for sample in samples)
    assert end["samples"] == len(samples) >= 1
    times = [line["t"] for line in lines]
    assert times == sorted(times)
    return start, samples, end


def sample_briefly(path: Path, pid: int, cuda_visible: str | None, seconds: float = 0.25,
                   interval_s: float = 0.05) -> list[str]:
    """Run a sampler on `pid` for `seconds`; return the notes it sent to the task log."""
    notes: list[str] = []
    sampler = TelemetrySampler(path, pid, interval_s, cuda_visible=cuda_visible, note=notes.append).start()
    time.sleep(seconds)
    sampler.stop()
    return notes


def test_only_the_gpu_in_cuda_visible_devices_is_sampled(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], sleeper: subprocess.Popen[bytes]) -> None:
    nvml = install_nvml()
    notes = sample_briefly(tmp_path / "t.jsonl", sleeper.pid, cuda_visible="1")
    start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    assert (start["nvml"], start["gpus"], start["interval_s"]) == ("ok", [1], 0.05)
    assert all(sample["gpus"] == [{"index": 1, "util_pct": 77, "mem_used_mb": 1024.0,
                                   "mem_total_mb": 40960.0, "power_w": 250.0}] for sample in samples)
    assert samples[0]["nproc"] == 1 and samples[0]["rss_mb"] > 0
    assert (nvml.calls["nvmlInit"], nvml.calls["nvmlShutdown"], notes) == (1, 1, [])


def test_on_a_shared_gpu_the_task_s_own_processes_memory_is_read_beside_the_device_s(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], sleeper: subprocess.Popen[bytes]) -> None:
    neighbour = 999_999_999  # a packed neighbour's process: not in the task's tree
    install_nvml([FakeGpu("GPU-aaaa", mem_used=30 * GIB, processes={sleeper.pid: 9 * GIB, neighbour: 20 * GIB})])
    sample_briefly(tmp_path / "t.jsonl", sleeper.pid, cuda_visible="0")
    _start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    [gpu] = samples[0]["gpus"]
    assert (gpu["mem_used_mb"], gpu["proc_mem_mb"]) == (30720.0, 9216.0)
    sample = to_sample(samples[0])
    assert sample is not None and sample.gpu_mem_mb == 9216.0  # the task's own, not the device's


def test_gpu_uuid_resolves_to_its_nvml_index(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], sleeper: subprocess.Popen[bytes]) -> None:
    install_nvml()
    sample_briefly(tmp_path / "t.jsonl", sleeper.pid, cuda_visible="GPU-bbbb,GPU-aaaa")
    start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    assert start["gpus"] == [1, 0]
    assert [(gpu["index"], gpu["util_pct"], gpu["power_w"]) for gpu in samples[0]["gpus"]] == [
        (1, 77, 250.0), (0, 11, 100.0)]


def test_mig_device_has_no_utilisation_or_power_but_has_memory(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], sleeper: subprocess.Popen[bytes]) -> None:
    install_nvml([*TWO_GPUS, FakeGpu("MIG-cccc", mem_used=2 * GIB, mem_total=10 * GIB, mig=True)])
    sample_briefly(tmp_path / "t.jsonl", sleeper.pid, cuda_visible="MIG-cccc")
    start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    assert (start["nvml"], start["gpus"]) == ("ok", [0])  # its CUDA ordinal: no NVML index of its own
    assert samples[0]["gpus"] == [{"index": 0, "util_pct": None, "mem_used_mb": 2048.0,
                                   "mem_total_mb": 10240.0, "power_w": None}]


def test_a_failing_nvml_call_nulls_that_metric_only(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], sleeper: subprocess.Popen[bytes]) -> None:
    install_nvml([FakeGpu("GPU-aaaa", failing=("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage")),
                  FakeGpu("GPU-bbbb", failing=("nvmlDeviceGetMemoryInfo",))])
    sample_briefly(tmp_path / "t.jsonl", sleeper.pid, cuda_visible=None)
    _start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    assert samples[-1]["gpus"] == [
        {"index": 0, "util_pct": None, "mem_used_mb": 1024.0, "mem_total_mb": 40960.0, "power_w": None},
        {"index": 1, "util_pct": 77, "mem_used_mb": None, "mem_total_mb": None, "power_w": 250.0}]


@pytest.mark.parametrize(("gpus", "cuda_visible", "reason"), [
    (TWO_GPUS, "", "CUDA_VISIBLE_DEVICES lists no GPU"),
    (TWO_GPUS, "NoDevFiles", "CUDA_VISIBLE_DEVICES lists no GPU"),
    ([], None, "no GPU visible to NVML"),
    (TWO_GPUS, "5", "no GPU visible to NVML (5: Invalid Argument)"),
])
def test_no_visible_gpu_means_cpu_only_with_the_reason(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], sleeper: subprocess.Popen[bytes],
        gpus: list[FakeGpu], cuda_visible: str | None, reason: str) -> None:
    nvml = install_nvml(gpus)
    notes = sample_briefly(tmp_path / "t.jsonl", sleeper.pid, cuda_visible, seconds=0.1)
    start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    assert (start["nvml"], start["gpus"], samples[0]["gpus"]) == (reason, [], [])
    assert notes == [f"campaignctl: GPU telemetry off: {reason}\n"]
    assert nvml.calls["nvmlShutdown"] == 1  # init succeeded, so it is shut down


def test_without_pynvml_cpu_and_memory_are_still_sampled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeper: subprocess.Popen[bytes]) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    notes = sample_briefly(tmp_path / "t.jsonl", sleeper.pid, cuda_visible="0")
    start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    assert start["nvml"].startswith("pynvml not importable") and start["gpus"] == []
    assert notes == [f"campaignctl: GPU telemetry off: {start['nvml']}\n"]
    assert samples[0]["rss_mb"] > 0 and samples[0]["gpus"] == []


# Each process spins for 1 s of its own CPU time, not of wall time: on a loaded machine a
# wall-clock loop may end before its sibling has started, or burn too little to sample.
BUSY_TREE = """
import subprocess, sys, time
busy = "import time\\nwhile time.process_time() < 1.0: pass"
child = subprocess.Popen([sys.executable, "-c", busy])
exec(busy)
child.wait()
"""


def test_cpu_of_a_busy_process_tree_is_summed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    child = subprocess.Popen([sys.executable, "-c", BUSY_TREE])
    sampler = TelemetrySampler(tmp_path / "t.jsonl", child.pid, 0.2, cuda_visible=None).start()
    child.wait()
    sampler.stop()
    _start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    # the CPU seconds the samples add up to between them: the two processes spin 1 s each, so more
    # than the parent's 1 s only if the child is summed in — whatever share of the CPU a loaded
    # machine gives them (a percentage above 50 was not reached at nice 10 in CI run 33: 48.4)
    used = sum(b["cpu_pct"] / 100 * (b["t"] - a["t"]) for a, b in pairwise(samples))
    assert used > 1.1, samples
    assert max(sample["nproc"] for sample in samples) == 2
    assert max(sample["rss_mb"] for sample in samples) > 0
    assert samples[-1]["nproc"] == 0  # the final sample: the tree has exited and been reaped


def test_a_sampler_that_cannot_write_stops_quietly_with_a_note(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    notes = sample_briefly(tmp_path / "missing" / "t.jsonl", sleeper.pid, cuda_visible=None, seconds=0.05)
    assert len(notes) == 1 and notes[0].startswith("campaignctl: telemetry stopped: FileNotFoundError")


def launch(tmp_path: Path, code: str, interval_s: float) -> TaskLaunch:
    return TaskLaunch(campaign="c", task_index=0, attempt_token="tok.0", argv=(sys.executable, "-c", code),
                      env={}, workdir=str(tmp_path), task_dir=str(tmp_path / "task"), telemetry_interval_s=interval_s)


def test_run_task_writes_telemetry_next_to_the_log_and_keeps_the_exit_code(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], monkeypatch: pytest.MonkeyPatch,
        keep_signal_handlers: None) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    install_nvml()
    task = launch(tmp_path, "import time; time.sleep(0.3); raise SystemExit(3)", interval_s=0.1)
    with pytest.raises(SystemExit) as exited:
        run_task(task)
    assert exited.value.code == 3
    assert json.loads((task.attempt_dir / "exit.json").read_text())["returncode"] == 3
    start, samples, _end = read_telemetry(task.attempt_dir / "telemetry.jsonl")
    assert (start["nvml"], start["gpus"], samples[0]["gpus"][0]["index"]) == ("ok", [0], 0)
    assert "GPU telemetry off" not in (task.attempt_dir / "output.log").read_text()


def test_run_task_without_a_driver_logs_the_reason_once_and_exits_normally(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], keep_signal_handlers: None) -> None:
    install_nvml(init_error=NVMLError_DriverNotLoaded())
    task = launch(tmp_path, "print('hello'); import time; time.sleep(0.2)", interval_s=0.05)
    run_task(task)  # returns: the program exited 0
    log = (task.attempt_dir / "output.log").read_text().splitlines()
    assert sorted(log) == ["campaignctl: GPU telemetry off: nvmlInit failed: Driver Not Loaded", "hello"]
    start, samples, _end = read_telemetry(task.attempt_dir / "telemetry.jsonl")
    assert start["nvml"] == "nvmlInit failed: Driver Not Loaded"
    assert all(sample["gpus"] == [] for sample in samples)


def test_run_task_with_interval_zero_writes_no_telemetry(tmp_path: Path, keep_signal_handlers: None) -> None:
    task = launch(tmp_path, "pass", interval_s=0)
    run_task(task)
    assert (task.attempt_dir / "output.log").exists()
    assert not (task.attempt_dir / "telemetry.jsonl").exists()


@pytest.mark.parametrize(("value", "ids"), [
    (None, None),
    ("", []),
    ("0,1", ["0", "1"]),
    (" 1 , 0", ["1", "0"]),
    ("0,x,1", ["0"]),  # CUDA stops at the first entry it cannot parse
    ("NoDevFiles", []),
    ("GPU-5b1c,MIG-0e2f", ["GPU-5b1c", "MIG-0e2f"]),
    ("-1,0", []),
])
def test_visible_gpu_ids_reads_cuda_visible_devices_like_cuda(value: str | None, ids: list[str] | None) -> None:
    assert visible_gpu_ids(value) == ids


def test_the_io_of_short_lived_children_counts_once_their_shell_reaps_them(tmp_path: Path) -> None:
    """Five `cat`s, each born and reaped between two reads, read an 8 MiB file each: the kernel
    adds a reaped child's /proc/<pid>/io counters to its parent's, so the tree's figure holds them
    though no read saw a `cat` alive; the next read, with nothing new done, adds nothing."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * (8 * 2**20))
    shell = subprocess.Popen(["sh", "-c", f'read go; for i in 1 2 3 4 5; do cat "{data}" > /dev/null; done; '
                                          'echo done; read end'],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        tree = ProcessTree(shell.pid)
        tree.read()  # the baseline: the shell waits for its go
        assert shell.stdin is not None and shell.stdout is not None
        shell.stdin.write("go\n")
        shell.stdin.flush()
        assert shell.stdout.readline() == "done\n"
        io = tree.read().io
        assert io is not None
        read_chars, write_chars, _, _ = io
        assert read_chars >= 5 * 8 * 2**20  # every cat's read of the file
        assert write_chars >= 5 * 8 * 2**20  # and its copy to /dev/null
        again = tree.read().io
        assert again is not None and again[0] < 2**20  # counted once
    finally:
        shell.kill()
        shell.wait()


def test_a_sample_carries_the_kernel_s_cpu_share_and_the_io_of_the_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    data = tmp_path / "data.bin"
    data.write_bytes(b"\0" * (4 * 2**20))
    reader = subprocess.Popen([sys.executable, "-c", f"import time\nend = time.time() + 1.5\n"
                               f"while time.time() < end:\n    open({str(data)!r}, 'rb').read()\n"])
    sampler = TelemetrySampler(tmp_path / "t.jsonl", reader.pid, 0.3, cuda_visible=None).start()
    reader.wait()
    sampler.stop()
    _start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    live = [s for s in samples if s["nproc"]]
    assert live and all({"cpu_sys_pct", "io_read_mb", "io_write_mb", "io_disk_read_mb", "io_disk_write_mb"} <= set(s)
                        for s in live)
    assert sum(s["io_read_mb"] for s in live) > 4 * 5  # the file, read again and again from the page cache


def test_each_gpu_s_pcie_rate_and_nvlink_bytes_since_the_last_sample_are_read_where_nvml_has_them(
        tmp_path: Path, install_nvml: Callable[..., ModuleType], sleeper: subprocess.Popen[bytes]) -> None:
    """GPU 0: PCIe and two NVLink links, each link's TX and RX counters 1,024 KiB on at each read;
    GPU 1: PCIe only, its field values all NOT_SUPPORTED, so NVLink is not asked again."""
    linked = FakeGpu("GPU-aaaa", pcie_kbs=(1200, 35100), nvlink_kib_per_read=1024)
    plain = FakeGpu("GPU-bbbb", pcie_kbs=(10, 20))
    nvml = install_nvml([linked, plain])
    sample_briefly(tmp_path / "t.jsonl", sleeper.pid, cuda_visible=None, seconds=0.3)
    _start, samples, _end = read_telemetry(tmp_path / "t.jsonl")
    first, later = samples[0]["gpus"], samples[1:]
    assert (first[0]["pcie_tx_kbs"], first[0]["pcie_rx_kbs"]) == (1200.0, 35100.0)
    assert "nvlink_tx_mb" not in first[0]  # the first reading is the baseline
    assert later and all(s["gpus"][0]["nvlink_tx_mb"] == s["gpus"][0]["nvlink_rx_mb"] == 2.0 for s in later)
    assert all("nvlink_tx_mb" not in s["gpus"][1] and s["gpus"][1]["pcie_rx_kbs"] == 20.0 for s in samples)
    assert plain.nvlink_reads == 1 and linked.nvlink_reads == len(samples)
    assert nvml.calls["nvmlDeviceGetFieldValues"] == len(samples) + 1


def test_a_task_in_a_cgroup_it_shares_reads_no_cgroup_figure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeper: subprocess.Popen[bytes]) -> None:
    """A plain-process pack's tasks run in their element's cgroup, together: the pack's runner
    starts each task's sampler with own_cgroup=False, and its lines carry no cgroup figure."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    step = tmp_path / "memory" / "step"
    step.mkdir(parents=True)
    for name, value in (("memory.limit_in_bytes", "209715200"), ("memory.max_usage_in_bytes", "104857600"),
                        ("memory.usage_in_bytes", "94371840"), ("memory.stat", "total_inactive_file 10485760")):
        (step / name).write_text(value + "\n")
    found = locate("4:memory:/step\n", tmp_path)
    monkeypatch.setattr("campaignctl.adapters.telemetry_sampler.locate", lambda: found)
    for own, name in ((True, "own.jsonl"), (False, "shared.jsonl")):
        TelemetrySampler(tmp_path / name, sleeper.pid, 0.05, cuda_visible=None, own_cgroup=own).start().stop()
    start, samples, _ = read_telemetry(tmp_path / "own.jsonl")
    assert start["cgroup_mem_limit_mb"] == 200.0
    assert (samples[-1]["cgroup_mem_peak_mb"], samples[-1]["cgroup_mem_ws_mb"]) == (100.0, 80.0)
    start, samples, _ = read_telemetry(tmp_path / "shared.jsonl")
    assert "cgroup_mem_limit_mb" not in start and not [s for s in samples if "cgroup_mem_peak_mb" in s]
