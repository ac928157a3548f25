"""What a campaign costs, in GPU-hours, CPU-hours and money. Pure.

- spent: every attempt's elapsed time × what Slurm allocated to it (sacct AllocTRES, e.g.
  `billing=2,cpu=2,gres/gpu:a100=1,gres/gpu=1,mem=200M,node=1`); before Slurm allocated anything,
  what was asked for. A multi-node job's AllocTRES is its whole allocation (`billing=4,cpu=4,
  mem=600M,node=2` for 2 nodes × 2 CPUs, tests/fixtures/slurm_events/SOURCES.md), and what it
  asks for is nodes × the per-node resources. A running attempt has spent its elapsed time so far.
- committed: what running attempts may still spend, up to their time limit.
- projected: pending attempts × their time limit.

Energy (kWh) is measured, not priced: spent is what the attempts' sacct ConsumedEnergy or NVML
power readings add up to (core/usage/energy.py); committed and projected use the campaign's measured
energy per attempt-hour so far (0 until an attempt has reported energy).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from campaignctl.core.base.units import parse_mem_mb
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.energy import kwh

DIMENSIONS = ("gpu_hours", "cpu_hours", "money", "energy_kwh")
_TYPED_GPU = re.compile(r"^gres/gpu:([^=]+)$")


@dataclass(frozen=True, slots=True)
class Amount:
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    money: float = 0.0
    energy_kwh: float = 0.0

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.gpu_hours + other.gpu_hours, self.cpu_hours + other.cpu_hours, self.money + other.money,
                      self.energy_kwh + other.energy_kwh)

    def times(self, factor: float) -> Amount:
        return Amount(self.gpu_hours * factor, self.cpu_hours * factor, self.money * factor,
                      self.energy_kwh * factor)

    def get(self, dimension: str) -> float:
        return float(getattr(self, dimension))


@dataclass(frozen=True, slots=True)
class UsageGroup:
    """Attempts in one phase with the same resources: one row of the store's GROUP BY."""

    phase: str  # ended | running | pending
    resources: Resources  # what was asked for
    alloc_tres: str  # what Slurm allocated ("" before it did)
    attempts: int
    elapsed_s: int  # summed over the group
    energy_j: float = 0.0  # summed over the group: each attempt's sacct energy, else its GPUs' (NVML)
    node_energy: int = 0  # attempts whose energy sacct measured (the node)
    gpu_energy: int = 0  # attempts whose energy their GPUs' NVML readings measured


@dataclass(frozen=True, slots=True)
class Spend:
    spent: Amount
    committed: Amount
    projected: Amount
    running: int
    pending: int
    per_task: Amount  # the dearest pending attempt at its time limit: what admitting one more costs


@dataclass(frozen=True, slots=True)
class Allocation:
    cpus: float  # a packed task's share of its pack's (core/packing/pack_fates.py) is a fraction
    gpus: float
    gpu_type: str | None
    mem_mb: int | None = None  # `mem=200M`: for the whole job (all its nodes)


def phase_of(state: str) -> str:
    """An attempt's domain state → ended | running | pending (what a budget counts it as)."""
    return {"RUNNING": "running", "PENDING": "pending", "SUBMITTING": "pending"}.get(state, "ended")


@functools.lru_cache(maxsize=4096)  # a campaign's attempts share a few allocations: status reads 10,000s
def parse_alloc_tres(text: str) -> Allocation | None:
    """`cpu=2,gres/gpu:a100=1,gres/gpu=1,mem=200M` → 2 CPUs, 1 a100, 200 MB. None for an empty field."""
    fields = dict(part.partition("=")[::2] for part in text.split(",") if "=" in part)
    if "cpu" not in fields:
        return None
    typed = [m[1] for key in fields if (m := _TYPED_GPU.match(key))]
    gpus = fields.get("gres/gpu", "0")
    return Allocation(_count(fields["cpu"]), _count(gpus), typed[0] if len(typed) == 1 else None,
                      _mem_mb(fields.get("mem", "")))


def _count(text: str) -> float:
    """`2` from Slurm; `0.25` from a packed task's share (core/packing/pack_fates.py); 0 for anything else."""
    try:
        value = float(text)
    except ValueError:
        return 0
    return value if value >= 0 and value == value and value != float("inf") else 0


def _mem_mb(text: str) -> int | None:
    try:
        return parse_mem_mb(text) if text else None
    except ValueError:
        return None


def hourly(resources: Resources, alloc_tres: str, prices: Prices) -> Amount:
    """What one hour of one attempt costs: allocated TRES if known, else what was requested."""
    alloc = parse_alloc_tres(alloc_tres) if alloc_tres else None
    cpus = alloc.cpus if alloc else resources.total_cpus
    gpus = alloc.gpus if alloc else resources.total_gpus
    gpu_type = (alloc.gpu_type if alloc else None) or resources.gpu_type
    return Amount(gpus, cpus, gpus * prices.gpu(gpu_type) + cpus * prices.cpu_hour)


def energy_rate_kw(groups: Iterable[UsageGroup]) -> float:
    """Measured energy per attempt-hour of the attempts that ran (kWh per hour: kW)."""
    ran = [g for g in groups if g.phase != "pending"]
    hours = sum(g.elapsed_s for g in ran) / 3600
    return kwh(sum(g.energy_j for g in ran)) / hours if hours > 0 else 0.0


def energy_source(groups: Iterable[UsageGroup]) -> str:
    """What measured the energy of these attempts: node (sacct), gpu (NVML), node+gpu, or ''."""
    groups = list(groups)
    return "+".join(name for name, n in (("node", sum(g.node_energy for g in groups)),
                                         ("gpu", sum(g.gpu_energy for g in groups))) if n)


def campaign_spend(groups: Iterable[UsageGroup], prices: Prices) -> Spend:
    groups = list(groups)
    # rate × elapsed summed over the attempts that ran is exactly their measured energy
    energy = Amount(energy_kwh=energy_rate_kw(groups))
    spent = committed = projected = per_task = Amount()
    running = pending = 0
    for g in groups:
        rate = hourly(g.resources, g.alloc_tres, prices) + energy
        limit_h = g.resources.time_min / 60
        elapsed_h = g.elapsed_s / 3600
        if g.phase == "pending":
            projected += rate.times(limit_h * g.attempts)
            pending += g.attempts
            one = rate.times(limit_h)
            per_task = Amount(*(max(per_task.get(d), one.get(d)) for d in DIMENSIONS))
        else:
            spent += rate.times(elapsed_h)
        if g.phase == "running":
            committed += rate.times(max(0.0, limit_h * g.attempts - elapsed_h))
            running += g.attempts
    return Spend(spent, committed, projected, running, pending, per_task)
