"""Energy of an attempt. Pure.

- GPU energy from the sampler's NVML power readings (`power_w`, nvmlDeviceGetPowerUsage: the
  board's draw in milliwatts): the trapezoid rule per GPU between consecutive readings of it. A pair of readings further
  apart than `MAX_GAP_INTERVALS` sampling intervals (a stopped sampler, a suspended job, a hung
  NVML call) is not bridged: those seconds are counted in `gap_s` and the energy is a lower
  bound. A new `start` line (the runner started again in the same attempt directory) begins a
  new series: nothing is integrated across it.
- Node energy from sacct's ConsumedEnergyRaw (joules), which Slurm fills only where the site
  runs an energy plugin (AcctGatherEnergyType; with acct_gather_energy/none it prints 0). It
  counts the node (IPMI, RAPL …), not only its GPUs, and so is preferred when present; sacct(1),
  22.05: "Only in the case of an exclusive job allocation does this value reflect the job's real
  energy consumption."
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MAX_GAP_INTERVALS = 3.0
J_PER_KWH = 3.6e6

Reading = tuple[int, float, float]  # (GPU index, t, watts): the last reading of one GPU


@dataclass(frozen=True, slots=True)
class Integrated:
    joules: float
    gap_s: float
    last: tuple[Reading, ...]


def gpu_powers(record: Mapping[str, object]) -> dict[int, float]:
    """{GPU index: watts} of one sample line; a GPU whose power NVML refused (null) is left out."""
    listed = record.get("gpus")
    gpus = [g for g in listed if isinstance(g, dict)] if isinstance(listed, list) else []
    return {int(g["index"]): float(g["power_w"]) for g in gpus
            if isinstance(g.get("index"), int) and isinstance(g.get("power_w"), (int, float))}


def integrate(last: tuple[Reading, ...], t: float, powers: Mapping[int, float],
              interval_s: float) -> Integrated:
    """Add the readings taken at `t` to the series whose last readings are `last`."""
    previous = {index: (t0, w0) for index, t0, w0 in last}
    max_gap = MAX_GAP_INTERVALS * interval_s if interval_s > 0 else float("inf")
    joules = gap_s = 0.0
    for index, watts in powers.items():
        if index not in previous:
            continue
        t0, w0 = previous[index]
        dt = t - t0
        if dt > max_gap:
            gap_s = max(gap_s, dt)
        elif dt > 0:  # a clock stepped back gives no energy, never a negative one
            joules += (w0 + watts) / 2 * dt
    current = {**previous, **{index: (t, watts) for index, watts in powers.items()}}
    return Integrated(joules, gap_s, tuple(sorted((i, tw[0], tw[1]) for i, tw in current.items())))


def kwh(joules: float) -> float:
    return joules / J_PER_KWH


def consumed_energy_j(raw: str) -> int | None:
    """sacct ConsumedEnergyRaw → joules; None where the site does not account energy (sacct
    prints 0 or nothing then: no job that ran consumed 0 J)."""
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


@dataclass(frozen=True, slots=True)
class Energy:
    joules: float
    source: str  # "node" (sacct: Slurm's energy accounting) | "gpu" (NVML: the task's GPUs)
    gap_s: float = 0.0  # NVML: seconds not covered by readings (the figure is a lower bound)

    @property
    def kwh(self) -> float:
        return kwh(self.joules)


def attempt_energy(sacct_j: int | None, gpu_j: float | None, gap_s: float = 0.0) -> Energy | None:
    """The node's energy from sacct when Slurm accounts it, else the GPUs' from NVML, else None."""
    if sacct_j is not None:
        return Energy(float(sacct_j), "node")
    if gpu_j:
        return Energy(gpu_j, "gpu", gap_s)
    return None
