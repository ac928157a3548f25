"""The GPUs a task can see, through NVML: each one's utilisation, memory, power, the memory the
task's own processes hold on it, and its interconnect (adapters/gpu_links.py). Opened once by the
sampler (adapters/telemetry_sampler.py), read every interval, shut down once; nothing here raises
into the task."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any, TypeVar

from campaignctl.adapters.gpu_links import LinkReader

MIB = float(2**20)
_T = TypeVar("_T")


def visible_gpu_ids(value: str | None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: None when unset (every GPU), else the listed indices
    or GPU-/MIG- UUIDs up to the first entry CUDA would reject ("0,x,1" shows only GPU 0, and
    Slurm's "NoDevFiles" or "" shows none; CUDA C Programming Guide, "CUDA Environment Variables").
    """
    if value is None:
        return None
    ids: list[str] = []
    for entry in (part.strip() for part in value.split(",")):
        if not (entry.isdigit() or entry.startswith(("GPU-", "MIG-"))):
            break
        ids.append(entry)
    return ids


class GpuProbe:
    """NVML handles for the GPUs the task can see, initialised once, shut down once."""

    def __init__(self, nvml: ModuleType, devices: list[tuple[int, Any]]) -> None:
        self._nvml = nvml
        self._devices = devices
        self._links = {index: LinkReader(nvml, handle) for index, handle in devices}  # adapters/gpu_links.py

    @property
    def indices(self) -> list[int]:
        return [index for index, _handle in self._devices]

    def read(self, pids: Collection[int] = ()) -> list[dict[str, object]]:
        """Each GPU's reading; with `pids` (the task's processes), also the memory those hold on
        it (`proc_mem_mb`): on a GPU shared by packed tasks, the device's figure is all of theirs."""
        return [self._read_one(index, handle, pids) for index, handle in self._devices]

    def close(self) -> None:
        _shutdown(self._nvml)

    def _read_one(self, index: int, handle: Any, pids: Collection[int]) -> dict[str, object]:
        nvml = self._nvml
        # On a MIG device handle, utilisation and power are NVML_ERROR_NOT_SUPPORTED ("On
        # MIG-enabled GPUs, querying device utilization rates is not currently supported", NVML
        # API reference); memory is per instance and works. Each metric fails on its own.
        util = self._guarded(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        memory = self._guarded(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        milliwatts = self._guarded(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        return {
            "index": index,
            "util_pct": None if util is None else int(util),
            "mem_used_mb": None if memory is None else round(memory.used / MIB, 1),
            "mem_total_mb": None if memory is None else round(memory.total / MIB, 1),
            "power_w": None if milliwatts is None else round(milliwatts / 1000.0, 1),
            **({} if (own := self._own_memory(handle, pids)) is None else {"proc_mem_mb": own}),
            **self._links[index].read(),
        }

    def _own_memory(self, handle: Any, pids: Collection[int]) -> float | None:
        """MB the task's processes hold on the GPU, from NVML's compute processes list; None when
        the list cannot be read or names none of them. NVML reports host pids: inside a container
        with its own pid namespace none match, and the device's figure stands alone. A process's
        usedGpuMemory is None where the driver hides it (Windows WDDM, some vGPUs)."""
        listing = getattr(self._nvml, "nvmlDeviceGetComputeRunningProcesses", None)  # pynvml 11+
        if not pids or listing is None:
            return None
        running = self._guarded(lambda: listing(handle))
        used = [p.usedGpuMemory for p in running or () if p.pid in pids and p.usedGpuMemory is not None]
        return round(sum(used) / MIB, 1) if used else None

    def _guarded(self, call: Callable[[], _T]) -> _T | None:
        try:
            return call()
        except self._nvml.NVMLError:
            return None


def open_gpus(cuda_visible: str | None) -> tuple[GpuProbe | None, str]:
    """(probe, "ok") or (None, why GPU telemetry is off). Never raises."""
    try:
        import pynvml  # lazy: a CPU-only task never loads libnvidia-ml
    except ImportError as exc:
        return None, f"pynvml not importable ({exc})"
    try:
        # No driver: NVMLError_LibraryNotFound (libnvidia-ml.so.1 missing) or
        # NVMLError_DriverNotLoaded (library present, kernel module not loaded).
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError, or an old pynvml without a symbol
        return None, f"nvmlInit failed: {exc}"
    return _probe_or_reason(pynvml, visible_gpu_ids(cuda_visible))


def _probe_or_reason(nvml: ModuleType, ids: list[str] | None) -> tuple[GpuProbe | None, str]:
    try:
        devices, missing = _resolve(nvml, ids)
    except Exception as exc:  # nvmlDeviceGetCount failing: a lost GPU, a driver mismatch
        devices, missing = [], [f"nvmlDeviceGetCount: {exc}"]
    if devices:
        return GpuProbe(nvml, devices), "ok"
    _shutdown(nvml)
    if ids == []:
        return None, "CUDA_VISIBLE_DEVICES lists no GPU"
    # A Slurm job without a GPU allocation has CUDA_VISIBLE_DEVICES unset and (ConstrainDevices)
    # no access to /dev/nvidia*: NVML then counts 0 devices, like nvidia-smi's "No devices were found".
    return None, "no GPU visible to NVML" + (f" ({'; '.join(missing)})" if missing else "")


def _shutdown(nvml: ModuleType) -> None:
    with contextlib.suppress(nvml.NVMLError):
        nvml.nvmlShutdown()


def _resolve(nvml: ModuleType, ids: list[str] | None) -> tuple[list[tuple[int, Any]], list[str]]:
    if ids is None:
        ids = [str(i) for i in range(nvml.nvmlDeviceGetCount())]
    devices: list[tuple[int, Any]] = []
    missing: list[str] = []
    for position, gpu_id in enumerate(ids):
        try:
            devices.append(_device(nvml, gpu_id, position))
        except nvml.NVMLError as exc:
            missing.append(f"{gpu_id}: {exc}")
    return devices, missing


def _device(nvml: ModuleType, gpu_id: str, position: int) -> tuple[int, Any]:
    # Indices are taken as NVML indices. NVML numbers GPUs by PCI bus id; CUDA does too with
    # CUDA_DEVICE_ORDER=PCI_BUS_ID, and by default (FASTEST_FIRST) whenever the GPUs are alike.
    if gpu_id.isdigit():
        return int(gpu_id), nvml.nvmlDeviceGetHandleByIndex(int(gpu_id))
    handle = nvml.nvmlDeviceGetHandleByUUID(gpu_id)  # pynvml encodes str → bytes itself
    try:
        return int(nvml.nvmlDeviceGetIndex(handle)), handle
    except nvml.NVMLError:  # a MIG device has no NVML index of its own: use its CUDA ordinal
        return position, handle
