#!/usr/bin/env python3
"""Benchmark the job-side telemetry sampler's own CPU cost (target: ≤ 1 % of one core at 10 s).

A busy process tree stands in for a training task: a python root that sleeps, with 4 children,
2 busy-looping and 2 sleeping (5 processes, like a trainer with data-loader workers). The
sampler runs against it for --duration seconds at interval 10 s and 1 s, once with NVML as this
machine has it (no driver: CPU and memory only) and once with a fake `pynvml` module of 2 GPUs
(PCIe and NVLink counters included) whose calls return at once, so the Python side of the NVML
calls is counted but not the driver. The "as found" runs are made twice more as a multi-node
attempt's sampler, which also reads the node's network counters (/proc/net/dev and any
InfiniBand port, adapters/node_io.py): the `network` column.

Measured in the sampler thread with `time.thread_time()` (CPU of that thread only): per sample
(median and max over the run), the setup (NVML init + baseline read), and the whole thread as %
of one core over the wall duration. The sampler finds the tree from the kernel's per-thread
children lists (adapters/process_tree.py); psutil's fallback reads /proc/<pid>/stat of every
process on the node, so the node's process count is printed too, and --node-procs N starts N idle
`sleep` processes outside the tree to show that the cost no longer grows with them.
No asserts: this prints a table.

Usage: .venv/bin/python scripts/bench_sampler.py [--duration 60] [--node-procs 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from campaignctl.adapters.gpu_probe import GpuProbe
from campaignctl.adapters.telemetry_sampler import TelemetrySampler

TREE = """
import subprocess, sys, time
busy = "while True: pass"
idle = "import time; time.sleep(3600)"
children = [subprocess.Popen([sys.executable, "-c", code]) for code in (busy, busy, idle, idle)]
time.sleep(3600)
"""


class TimedSampler(TelemetrySampler):
    """The real sampler, with the thread CPU of each sample recorded."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sample_cpu_s: list[float] = []

    def _take_sample(self, write: Callable[[bytes], object], gpus: GpuProbe | None, last: float) -> float:
        before = time.thread_time()
        result = super()._take_sample(write, gpus, last)
        self.sample_cpu_s.append(time.thread_time() - before)
        return result


@dataclass(frozen=True, slots=True)
class Row:
    nvml: str
    network: bool
    interval_s: float
    samples: int
    sample_ms_median: float
    sample_ms_max: float
    setup_ms: float
    thread_cpu_ms: float
    pct_of_one_core: float
    tree_cpu_pct_median: float
    tree_nproc: int


def fake_pynvml(gpu_count: int = 2) -> ModuleType:
    nvml = ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    nvml.__dict__.update(
        NVMLError=NVMLError, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: gpu_count, nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetHandleByUUID=lambda _u: 0, nvmlDeviceGetIndex=lambda h: h,
        nvmlDeviceGetUtilizationRates=lambda _h: SimpleNamespace(gpu=90, memory=40),
        nvmlDeviceGetMemoryInfo=lambda _h: SimpleNamespace(used=30 * 2**30, total=80 * 2**30, free=50 * 2**30),
        nvmlDeviceGetPowerUsage=lambda _h: 300_000,
        # the interconnect (adapters/gpu_links.py): PCIe rates, and NVLink counters on 12 of the links asked
        NVML_PCIE_UTIL_TX_BYTES=0, NVML_PCIE_UTIL_RX_BYTES=1, nvmlDeviceGetPcieThroughput=lambda _h, c: 1000 + c,
        nvmlDeviceGetFieldValues=lambda _h, fields: [
            SimpleNamespace(fieldId=f, scopeId=link, nvmlReturn=0 if link < 12 else 3,
                            value=SimpleNamespace(ullVal=int(time.time()) * 1024)) for f, link in fields],
    )
    return nvml


@contextmanager
def nvml_module(kind: str) -> Iterator[None]:
    saved = sys.modules.get("pynvml")
    if kind == "fake 2 GPUs":
        sys.modules["pynvml"] = fake_pynvml()
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = saved


@contextmanager
def busy_tree() -> Iterator[subprocess.Popen[bytes]]:
    root = subprocess.Popen([sys.executable, "-c", TREE])
    try:
        time.sleep(0.5)  # let the children start
        yield root
    finally:
        for proc in psutil.Process(root.pid).children(recursive=True):
            proc.kill()
        root.kill()
        root.wait()


def run_one(nvml: str, network: bool, interval_s: float, duration_s: float, workdir: Path) -> Row:
    path = workdir / f"{nvml.replace(' ', '_')}-{network}-{interval_s:g}.jsonl"
    with nvml_module(nvml), busy_tree() as root:
        sampler = TimedSampler(path, root.pid, interval_s, cuda_visible=None, interfaces=() if network else None)
        started = time.monotonic()
        sampler.start()
        time.sleep(duration_s)
        sampler.stop()
        wall_s = time.monotonic() - started
    samples = [line for line in map(json.loads, path.read_text().splitlines()) if "event" not in line]
    live = [sample for sample in samples if sample["nproc"]]
    per_sample_ms = [s * 1000 for s in sampler.sample_cpu_s]
    status = json.loads(path.read_text().splitlines()[0])["nvml"]
    return Row(nvml=nvml if status == "ok" else f"{nvml}: off", network=network,
               interval_s=interval_s, samples=sampler.samples,
               sample_ms_median=round(statistics.median(per_sample_ms), 3),
               sample_ms_max=round(max(per_sample_ms), 3), setup_ms=round(sampler.setup_cpu_s * 1000, 3),
               thread_cpu_ms=round(sampler.thread_cpu_s * 1000, 2),
               pct_of_one_core=round(100 * sampler.thread_cpu_s / wall_s, 4),
               tree_cpu_pct_median=statistics.median(s["cpu_pct"] for s in live),
               tree_nproc=max(s["nproc"] for s in live))


@contextmanager
def idle_processes(count: int) -> Iterator[None]:
    procs = [subprocess.Popen(["sleep", "3600"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def print_table(rows: list[Row], duration_s: float, node_procs: int) -> None:
    print(f"sampler self-cost over {duration_s:g} s per run; node: {psutil.cpu_count()} CPUs, "
          f"{node_procs} processes during the runs; python {sys.version.split()[0]}, psutil {psutil.__version__}")
    header = ("nvml", "network", "interval s", "samples", "per-sample ms (median)", "per-sample ms (max)", "setup ms",
              "thread CPU ms", "% of one core", "tree cpu_pct (median)", "tree nproc")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(value) for value in asdict(row).values()) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per run (default 60)")
    parser.add_argument("--node-procs", type=int, default=0, help="idle processes to add to the node")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sampler-") as workdir, idle_processes(args.node_procs):
        node_procs = len(psutil.pids()) + 5  # + the tree, started per run
        runs = [("as found", False), ("as found", True), ("fake 2 GPUs", False)]
        rows = [run_one(nvml, network, interval, args.duration, Path(workdir))
                for nvml, network in runs for interval in (10.0, 1.0)]
    if args.json:
        print(json.dumps([asdict(row) for row in rows], indent=2))
    else:
        print_table(rows, args.duration, node_procs)


if __name__ == "__main__":
    main()
