"""A stand-in for nvidia-ml-py's `pynvml`, for jobs on the lab cluster (its GPUs are /dev/null
clones): put this directory on the job's PYTHONPATH and the sampler reads GPUs that sit at
FAKE_NVML_UTIL % (default 3) and draw FAKE_NVML_POWER_W watts (default 61; a comma list gives
GPU 0, GPU 1 each their own, e.g. "250,300"). Only the calls the sampler makes.

GPU memory: a process "holds" some by writing a file FAKE_NVML_DIR/<node>/<gpu>/<pid> with the MB
(tests/integration/toy_trainer.py does). A GPU's used memory is 2 GiB plus what the live
processes' files say, and its compute processes are those pids, as NVML lists them. <node> is
SLURMD_NODENAME: the lab's nodes are one machine, so they share the directory."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

BASE_USED_MB = 2048
TOTAL_MB = 40960


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    pass


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return 2


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    return index


def nvmlDeviceGetHandleByUUID(uuid: str) -> int:
    raise NVMLError("no UUIDs on the fake")


def nvmlDeviceGetIndex(handle: int) -> int:
    return handle


def nvmlDeviceGetUtilizationRates(handle: int) -> SimpleNamespace:
    return SimpleNamespace(gpu=int(os.environ.get("FAKE_NVML_UTIL", "3")), memory=1)


def _held(handle: int) -> dict[int, float]:
    """pid → MB held on GPU `handle` of this node, of processes still alive."""
    folder = Path(os.environ.get("FAKE_NVML_DIR", "/nonexistent")) / os.environ.get("SLURMD_NODENAME", "") / str(handle)
    held = {}
    for entry in folder.glob("*") if folder.is_dir() else ():
        if entry.name.isdigit() and Path(f"/proc/{entry.name}").exists():
            try:
                held[int(entry.name)] = float(entry.read_text() or 0)
            except (OSError, ValueError):
                continue
    return held


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:
    used = (BASE_USED_MB + sum(_held(handle).values())) * 2**20
    return SimpleNamespace(used=used, total=TOTAL_MB * 2**20, free=TOTAL_MB * 2**20 - used)


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(pid=pid, usedGpuMemory=int(mb * 2**20)) for pid, mb in _held(handle).items()]


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    watts = os.environ.get("FAKE_NVML_POWER_W", "61").split(",")
    return int(float(watts[min(handle, len(watts) - 1)]) * 1000)  # milliwatts
