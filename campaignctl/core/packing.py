"""How many small tasks share one GPU under `pack: auto`, chosen from what earlier attempts of the
same profile group were measured to use: the group's p95 peak GPU memory against the GPU's
memory, and its mean GPU utilisation against the whole GPU, each with headroom, never above what
the spec allows. Pure: the samples come from the profile store (adapters/profile_store.py), as
right-sizing reads them.

A GPU's memory is the hard limit: tasks that share it and together ask for more than it holds
fail with CUDA out of memory. Utilisation is the soft one: tasks that together want more than
one GPU's compute still run, only slower each, so past it packing stops paying. NVML reports
both per device; the per-process memory of each packed task is what its own attempt's telemetry
records."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from campaignctl.core.right_size import UsageSample, quantile

HEADROOM = 0.2  # plan for at most 80 % of a GPU's memory and of its compute
MIN_SAMPLES = 3  # fewer ended attempts measured on a GPU: no packing from history
GPU_MEM_QUANTILE = 0.95


@dataclass(frozen=True, slots=True)
class Measured:
    """What a group's ended attempts used on their GPU (None: not measured)."""

    samples: int  # ended attempts with GPU telemetry
    gpu_mem_peak_mb: float | None  # the GPU_MEM_QUANTILE of their peaks
    gpu_mem_total_mb: float | None  # the GPU's memory, as NVML reported it
    gpu_util_mean_pct: float | None  # the mean of their mean utilisations


@dataclass(frozen=True, slots=True)
class Packing:
    per_gpu: int  # tasks sharing one GPU (1: not packed)
    why: str  # one sentence: which limit bound it
    evidence: Mapping[str, object] = field(default_factory=dict)


def measured(samples: Sequence[UsageSample], gpu_mem_total_mb: float | None,
             gpu_util_mean_pct: Sequence[float]) -> Measured:
    """The group's attempts that ended COMPLETED with a GPU memory reading; utilisation means as
    their telemetry summaries hold them."""
    peaks = [s.gpu_mem_mb for s in samples if s.state == "COMPLETED" and s.gpu_mem_mb is not None]
    return Measured(len(peaks), quantile(peaks, GPU_MEM_QUANTILE) if peaks else None, gpu_mem_total_mb,
                    sum(gpu_util_mean_pct) / len(gpu_util_mean_pct) if gpu_util_mean_pct else None)


def choose_per_gpu(m: Measured, allowed: int, headroom: float = HEADROOM) -> Packing:
    """Tasks per GPU: the fewest that GPU memory and compute admit, at most `allowed` (the spec's)."""
    evidence: dict[str, object] = {"samples": m.samples, "gpu_mem_peak_mb": m.gpu_mem_peak_mb,
                                   "gpu_mem_total_mb": m.gpu_mem_total_mb, "gpu_util_mean_pct": m.gpu_util_mean_pct,
                                   "headroom": headroom, "allowed": allowed}
    if allowed <= 1:
        return Packing(1, "the spec allows one task per GPU", evidence)
    if m.samples < MIN_SAMPLES or not m.gpu_mem_peak_mb or not m.gpu_mem_total_mb:
        return Packing(1, f"{m.samples} ended attempt(s) of the group measured on a GPU, fewer than "
                          f"{MIN_SAMPLES}: not packed until more have run", evidence)
    by_memory = math.floor(m.gpu_mem_total_mb * (1 - headroom) / m.gpu_mem_peak_mb)
    by_compute = math.floor(100 * (1 - headroom) / m.gpu_util_mean_pct) if m.gpu_util_mean_pct else allowed
    limits = {"GPU memory": by_memory, "GPU compute": by_compute, "the spec": allowed}
    binding = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    per_gpu = max(1, limits[binding])
    evidence.update(by_memory=by_memory, by_compute=by_compute)
    return Packing(per_gpu, f"{per_gpu} per GPU, bound by {binding}: p95 peak {m.gpu_mem_peak_mb:.0f} MB of "
                            f"{m.gpu_mem_total_mb:.0f} MB, mean utilisation "
                            + (f"{m.gpu_util_mean_pct:.0f} %" if m.gpu_util_mean_pct is not None else "unknown")
                            + f", {headroom:.0%} kept free", evidence)
