"""Efficiency of attempts, tasks and campaigns, each figure a fraction of what Slurm allocated
(what `seff` and reportseff print as percentages). Pure.

- cpu: mean CPU use of the task's process tree (telemetry, % of one core summed over the tree) ÷
  (100 × allocated cores). sacct AllocTRES `cpu=2` is what Slurm gave; before it reported one,
  the cores asked for.
- mem: peak memory ÷ allocated memory, the allocation being AllocTRES `mem=`, else the memory
  asked for (`--mem`). The peak is the quantity Slurm's limit is enforced on: the peak usage of
  the task's memory cgroup, page cache included (the sampler's `cgroup_mem_peak_mb`;
  adapters/cgroup_memory.py), so it never reads over 100 % without an OOM-kill. Where no cgroup
  was read (ConstrainRAMSpace=no, an attempt run before this reading existed) it is the larger of
  sacct MaxRSS and the sampler's summed RSS, which count pages shared by forked workers once per
  process and can read over 100 %. `mem_source` says which: cgroup or rss.
- time: elapsed ÷ time limit (the attempt's effective limit, after any resize).
- gpu_util: mean utilisation of the task's GPUs (NVML), gpu_mem: their peak memory use ÷ their
  memory (NVML memory.total): Slurm allocates whole GPUs.
- gpu_hours, cost: elapsed × allocated GPUs, and × the policy's prices (core/usage/cost.py).
- energy_kwh: what the attempts consumed, each by sacct's ConsumedEnergy (the node) where the
  site accounts energy, else by its GPUs' NVML power (core/usage/energy.py); `energy_source` says
  which: node, gpu, or node+gpu for a task or campaign whose attempts differ; `energy_partial`
  that some NVML readings were too far apart to integrate (the figure is a lower bound, `≥`).
- io_mbps: read/write syscalls' bytes per second (the sampler's `rchar`/`wchar` deltas).
- bottleneck: what held the attempt back, compute | io | communication | memory | idle, and
  `bottleneck_why` the figures behind it (core/usage/bottleneck.py: the thresholds); a task's is
  its latest attempt's, a campaign has none.

A figure that was not measured is None, never 0: a job that ran without the sampler has no CPU
figure, a pending one no time figure, a CPU-only one no GPU figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace

from campaignctl.core.model.sacct_values import rss_mb
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.bottleneck import bottleneck
from campaignctl.core.usage.cost import hourly, parse_alloc_tres, phase_of
from campaignctl.core.usage.energy import attempt_energy
from campaignctl.core.usage.telemetry import Summary


@dataclass(frozen=True, slots=True)
class AttemptUse:
    """What is known of one attempt: the store's last observation and its telemetry summary."""

    state: str
    elapsed_s: int | None
    resources: Resources  # effective: what it asked for, after any in-place resize
    alloc_tres: str = ""  # sacct AllocTRES ("" before Slurm allocated anything)
    max_rss: str = ""  # sacct MaxRSS of its largest step ("" if none reported)
    telemetry: Summary | None = None
    consumed_energy_j: int | None = None  # sacct ConsumedEnergyRaw, where the site accounts energy


@dataclass(frozen=True, slots=True)
class Efficiency:
    cpu: float | None = None
    mem: float | None = None
    time: float | None = None
    gpu_util: float | None = None
    gpu_mem: float | None = None
    gpu_mem_peak_mb: float | None = None
    rss_peak_mb: float | None = None  # summed RSS (sacct MaxRSS or the sampler's), whichever is higher
    mem_peak_mb: float | None = None  # what `mem` divides: the cgroup peak, else rss_peak_mb
    mem_source: str | None = None  # cgroup | rss (cgroup+rss: a campaign whose attempts differ)
    gpu_hours: float | None = None
    cost: float | None = None
    energy_kwh: float | None = None
    energy_source: str | None = None  # node (sacct) | gpu (NVML) | node+gpu
    energy_partial: bool = False  # NVML readings had gaps: the energy is a lower bound
    io_mbps: float | None = None  # read + written through syscalls, MiB/s
    bottleneck: str | None = None  # compute | io | communication | memory | idle
    bottleneck_why: str | None = None

    def to_dict(self) -> dict[str, float | str | None]:
        return {k: v if v is None or isinstance(v, (str, bool)) else round(v, 6 if k == "energy_kwh" else 4)
                for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class _Allocated:
    cores: float
    mem_mb: float
    gpus: float


def _allocated(use: AttemptUse) -> _Allocated:
    alloc = parse_alloc_tres(use.alloc_tres) if use.alloc_tres else None
    r = use.resources
    if alloc is None:
        return _Allocated(r.cpus_per_task, r.mem_mb, r.gpus)
    return _Allocated(alloc.cpus or r.cpus_per_task, alloc.mem_mb or r.mem_mb, alloc.gpus)


def _ran_s(use: AttemptUse) -> int | None:
    """Seconds it ran; None when unknown, and for work that has not started."""
    if use.elapsed_s is None or (phase_of(use.state) == "pending" and not use.elapsed_s):
        return None
    return use.elapsed_s


def _peak_rss_mb(use: AttemptUse) -> float | None:
    sampled = use.telemetry.rss_max_mb if use.telemetry is not None and use.telemetry.samples else None
    known = [v for v in (rss_mb(use.max_rss), sampled) if v is not None]
    return max(known) if known else None


def _ratio(part: float | None, whole: float) -> float | None:
    return None if part is None or whole <= 0 else part / whole


def attempt_efficiency(use: AttemptUse, prices: Prices) -> Efficiency:
    alloc, ran = _allocated(use), _ran_s(use)
    t = use.telemetry if use.telemetry is not None and use.telemetry.samples else None
    g = t if t is not None and t.gpu_samples else None
    peak = _peak_rss_mb(use)
    cgroup = t.cgroup_mem_peak_mb if t is not None and t.cgroup_mem_peak_mb > 0 else None
    mem_peak = cgroup if cgroup is not None else peak
    rate = hourly(use.resources, use.alloc_tres, prices)
    energy = attempt_energy(use.consumed_energy_j, use.telemetry.gpu_energy_j if use.telemetry else None,
                            use.telemetry.energy_gap_s if use.telemetry else 0.0)
    # the sampler's RSS, not sacct's MaxRSS, which counts page cache on some sites (Slurm 24.11's
    # jobacct_gather/cgroup on cgroup v1: tests/integration/test_cgroup_memory_real.py) and would
    # call a streaming task short of memory
    held = bottleneck(t, alloc.cores, alloc.mem_mb, alloc.gpus, t.rss_max_mb if t else None)
    return Efficiency(
        cpu=_ratio(t.cpu_mean, 100.0 * alloc.cores) if t else None,
        mem=_ratio(mem_peak, alloc.mem_mb),
        time=_ratio(ran, use.resources.time_min * 60.0),
        gpu_util=_ratio(g.gpu_util_mean, 100.0) if g else None,
        gpu_mem=_ratio(g.gpu_mem_max_mb, g.gpu_mem_total_mb) if g else None,
        gpu_mem_peak_mb=g.gpu_mem_max_mb if g else None,
        rss_peak_mb=peak,
        mem_peak_mb=mem_peak,
        mem_source=None if mem_peak is None else "cgroup" if cgroup is not None else "rss",
        gpu_hours=None if ran is None else rate.gpu_hours * ran / 3600,
        cost=None if ran is None else rate.money * ran / 3600,
        energy_kwh=energy.kwh if energy else None,
        energy_source=energy.source if energy else None,
        energy_partial=bool(energy and energy.gap_s),
        io_mbps=t.io_mbps if t else None,
        bottleneck=held.label if held else None, bottleneck_why=held.why if held else None)



def memo(prices: Prices) -> Callable[[AttemptUse], Efficiency]:
    """attempt_efficiency at `prices`, each attempt computed once (status shows each attempt's
    figures in its task's row and in the campaign's)."""
    seen: dict[int, tuple[AttemptUse, Efficiency]] = {}

    def of(use: AttemptUse) -> Efficiency:
        known = seen.get(id(use))
        if known is None or known[0] is not use:
            known = seen[id(use)] = (use, attempt_efficiency(use, prices))
        return known[1]

    return of


def task_efficiency(uses: Sequence[AttemptUse], prices: Prices,
                    of: Callable[[AttemptUse], Efficiency] | None = None) -> Efficiency:
    """A task (or a config across rungs), its attempts in order: the ratios of the latest attempt
    that ran (of the latest, if none did), GPU-hours and cost of all of them."""
    if not uses:
        return Efficiency()
    ran = [u for u in uses if _ran_s(u) is not None]
    of = of or (lambda u: attempt_efficiency(u, prices))
    latest = of((ran or list(uses))[-1])
    each = [of(u) for u in ran]
    return _with_totals(latest, each)


def _with_totals(base: Efficiency, each: Sequence[Efficiency]) -> Efficiency:
    if len(each) == 1 and each[0] is base:
        return base  # one attempt: its totals are its own (10,000 copies saved in a status)
    hours = [e.gpu_hours for e in each if e.gpu_hours is not None]
    money = [e.cost for e in each if e.cost is not None]
    energy = [e for e in each if e.energy_kwh is not None]
    sources = sorted({e.energy_source for e in energy if e.energy_source}, key=("node", "gpu").index)
    return replace(base, gpu_hours=sum(hours) if hours else None, cost=sum(money) if money else None,
                   energy_kwh=sum(e.energy_kwh or 0.0 for e in energy) if energy else None,
                   energy_source="+".join(sources) or None, energy_partial=any(e.energy_partial for e in energy))


def campaign_efficiency(uses: Sequence[AttemptUse], prices: Prices,
                        of: Callable[[AttemptUse], Efficiency] | None = None) -> Efficiency:
    """Every attempt that ran, each weighted by what it held for how long, as seff's totals do:
    cpu = Σ used core-seconds ÷ Σ allocated core-seconds, mem = Σ peak × elapsed ÷ Σ allocated ×
    elapsed, time = Σ elapsed ÷ Σ limits, gpu_util by GPU-seconds; gpu_mem and the peaks are the
    highest any attempt reached (what the next campaign must allow for)."""
    efficiency_of = of or (lambda u: attempt_efficiency(u, prices))
    cpu, mem, time, gpu = _Sum(), _Sum(), _Sum(), _Sum()
    effs = []
    for use in uses:
        ran = _ran_s(use)
        if ran is None:
            continue
        e, a = efficiency_of(use), _allocated(use)
        effs.append(e)
        cpu.add(e.cpu, a.cores * ran)
        mem.add(e.mem, a.mem_mb * ran)
        time.add(e.time, use.resources.time_min * 60.0)
        gpu.add(e.gpu_util, a.gpus * ran)
    sources = sorted({e.mem_source for e in effs if e.mem_source})
    peak = Efficiency(cpu.value, mem.value, time.value, gpu.value, _highest(e.gpu_mem for e in effs),
                      _highest(e.gpu_mem_peak_mb for e in effs), _highest(e.rss_peak_mb for e in effs),
                      _highest(e.mem_peak_mb for e in effs), "+".join(sources) or None)
    return _with_totals(peak, effs)


class _Sum:
    """A weighted mean of the known values."""

    def __init__(self) -> None:
        self.part = self.whole = 0.0

    def add(self, value: float | None, weight: float) -> None:
        if value is not None and weight > 0:
            self.part += value * weight
            self.whole += weight

    @property
    def value(self) -> float | None:
        return self.part / self.whole if self.whole else None


def _highest(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


# --- text: the same cells in `status --wide`, `results` and the report's task table ---------

COLUMNS = ("cpu", "mem", "time", "gpu", "gpu mem", "GPU-h", "cost", "kWh", "bound")


def cells(e: Efficiency | None) -> tuple[str, ...]:
    """`('45%', '12%', '80%', '-', '-', '0.25', '0.75', '0.55 gpu', 'io')`: percentages of what
    Slurm allocated, `-` for what was not measured; energy with what measured it; the bottleneck."""
    e = e or Efficiency()
    return (_pct(e.cpu), _pct(e.mem), _pct(e.time), _pct(e.gpu_util), _gpu_mem(e),
            "-" if e.gpu_hours is None else f"{e.gpu_hours:.3g}", "-" if e.cost is None else f"{e.cost:.3g}",
            "-" if e.energy_kwh is None else f"{'≥' if e.energy_partial else ''}{e.energy_kwh:.3g} {e.energy_source}",
            e.bottleneck or "-")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _gpu_mem(e: Efficiency) -> str:
    if e.gpu_mem_peak_mb is None:
        return "-"
    peak = f"{e.gpu_mem_peak_mb / 1024:.1f}G"
    return peak if e.gpu_mem is None else f"{_pct(e.gpu_mem)} ({peak})"


def efficiency_text(e: Efficiency | None) -> str:
    """`cpu 45%, mem 12%, time 80%, gpu -, gpu mem -, GPU-h 0.25, cost 0.75, kWh 0.55 gpu`; one
    line, its bottleneck (`, bound io`) where it has one (a campaign has none)."""
    return ", ".join(f"{name} {cell}" for name, cell in zip(COLUMNS, cells(e), strict=True)
                     if name != "bound" or cell != "-")
