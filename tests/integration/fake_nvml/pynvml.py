"""A stand-in for nvidia-ml-py's `pynvml`, for jobs on the lab cluster (its GPUs are /dev/null
clones): put this directory on the job's PYTHONPATH and the sampler reads GPUs that sit at
FAKE_NVML_UTIL % (default 3) and draw FAKE_NVML_POWER_W watts (default 61; a comma list gives
GPU 0, GPU 1 each their own, e.g. "250,300"). Only the calls the sampler makes."""

from __future__ import annotations

import os
from types import SimpleNamespace


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


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:
    return SimpleNamespace(used=2 * 2**30, total=40 * 2**30, free=38 * 2**30)


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    watts = os.environ.get("FAKE_NVML_POWER_W", "61").split(",")
    return int(float(watts[min(handle, len(watts) - 1)]) * 1000)  # milliwatts
