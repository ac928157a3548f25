"""A stand-in for nvidia-ml-py's `pynvml`, for jobs on the lab cluster (its GPUs are /dev/null
clones): put this directory on the job's PYTHONPATH and the sampler reads GPUs that sit at
FAKE_NVML_UTIL % (default 3) and draw FAKE_NVML_POWER_W watts (default 61; a comma list gives
GPU 0, GPU 1 each their own, e.g. "250,300"). Only the calls the sampler makes.

GPU memory: a process "holds" some by writing a file FAKE_NVML_DIR/<node>/<gpu>/<pid> with the MB
(tests/integration/toy_trainer.py does). A GPU's used memory is 2 GiB plus what the live
processes' files say, and its compute processes are those pids, as NVML lists them. <node> is
SLURMD_NODENAME: the lab's nodes are one machine, so they share the directory.

Interconnect: PCIe throughput FAKE_NVML_PCIE_KBS, NVLink counters FAKE_NVML_NVLINK_KIBS (below),
with the names, units and per-field errors of NVML's calls (adapters/gpu_links.py cites them)."""

from __future__ import annotations

import os
import time
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


NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED = 0, 3


def nvmlDeviceGetPcieThroughput(handle: int, counter: int) -> int:
    """FAKE_NVML_PCIE_KBS "tx,rx" in KB/s (default 1200,35100), as NVML's 20-ms window rate."""
    rates = os.environ.get("FAKE_NVML_PCIE_KBS", "1200,35100").split(",")
    return int(float(rates[min(counter, len(rates) - 1)]))


def nvmlDeviceGetFieldValues(handle: int, fields: list[tuple[int, int]]) -> list[SimpleNamespace]:
    """NVLink data counters (fields 138 TX, 139 RX, scopeId the link): two links, each counting
    FAKE_NVML_NVLINK_KIBS KiB a second since the epoch; unset or 0, a GPU without NVLink (every
    field NOT_SUPPORTED, as NVML answers it per field)."""
    rate = float(os.environ.get("FAKE_NVML_NVLINK_KIBS", "0"))
    counted = int(time.time() * rate)
    return [SimpleNamespace(fieldId=field, scopeId=link, timestamp=0, latencyUsec=0, valueType=3,
                            nvmlReturn=NVML_SUCCESS if rate and link < 2 else NVML_ERROR_NOT_SUPPORTED,
                            value=SimpleNamespace(ullVal=counted if rate and link < 2 else 0))
            for field, link in fields]
