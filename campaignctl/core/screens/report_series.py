"""Series the report draws, from plain records. Pure.

- utilisation: telemetry samples in time buckets, per task and over the whole campaign (GPU
  utilisation in %, CPU in % of the cores the attempt was given);
- spend over time: each run costs its hourly rate (what Slurm allocated, see core/usage/cost.py) from
  its start to its end, or to now while it runs. That is the same elapsed × rate `campaign_spend`
  counts, laid out in time; a running attempt's start is only known to a tick's resolution, so
  the curve's last point may differ from `status` by the time between a start and the tick that
  saw it;
- metric curves: one panel per rung (core/tuning/ladder.py), one curve per task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.model.training_metrics import Curve, curves_by_task
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.tuning.ladder import rung_names, rung_of
from campaignctl.core.usage.cost import Amount
from campaignctl.core.usage.telemetry import Sample

Point = tuple[float, float]  # (time or step, value)
MetricRow = tuple[int, int, int, str, float, float | None]  # task, attempt, step, name, value, t


@dataclass(frozen=True, slots=True)
class AttemptSamples:
    task_index: int
    cpus: int  # cores the attempt was given: CPU % is of these
    samples: Sequence[Sample]


@dataclass(frozen=True, slots=True)
class Utilisation:
    gpu_mean: tuple[Point, ...]  # mean over every sample in the bucket, all tasks together
    cpu_mean: tuple[Point, ...]
    gpu_by_task: dict[int, tuple[Point, ...]]
    cpu_by_task: dict[int, tuple[Point, ...]]
    samples: int


@dataclass(frozen=True, slots=True)
class RunCost:
    started: float
    ended: float | None  # None: still running
    hourly: Amount  # what one hour of it costs (GPU-h, CPU-h, money per hour)


@dataclass(frozen=True, slots=True)
class RungCurves:
    rung: int
    name: str
    curves: dict[int, Curve]  # task index → (step, value) in report order


class _Buckets:
    """Running means per (key, bucket) over a time window cut into `count` buckets."""

    def __init__(self, lo: float, hi: float, count: int) -> None:
        self.lo, self.width, self.count = lo, max(hi - lo, 1e-9) / count, count
        self.sums: dict[object, dict[int, list[float]]] = {}

    def add(self, key: object, t: float, value: float) -> None:
        b = min(self.count - 1, max(0, int((t - self.lo) / self.width)))
        acc = self.sums.setdefault(key, {}).setdefault(b, [0.0, 0.0])
        acc[0] += value
        acc[1] += 1

    def series(self, key: object) -> tuple[Point, ...]:
        found = sorted(self.sums.get(key, {}).items())
        return tuple((self.lo + (b + 0.5) * self.width, s / n) for b, (s, n) in found)


def utilisation(attempts: Iterable[AttemptSamples], window: tuple[float, float], buckets: int = 200) -> Utilisation:
    gpu, cpu = _Buckets(*window, buckets), _Buckets(*window, buckets)
    count = 0
    for a in attempts:
        for s in a.samples:
            count += 1
            for key in (a.task_index, "all"):
                cpu.add(key, s.t, s.cpu_pct / max(1, a.cpus))
                if s.gpu_util_pct is not None:
                    gpu.add(key, s.t, s.gpu_util_pct)
    tasks = sorted(k for k in cpu.sums if isinstance(k, int))
    return Utilisation(gpu.series("all"), cpu.series("all"),
                       {k: gpu.series(k) for k in tasks if k in gpu.sums}, {k: cpu.series(k) for k in tasks}, count)


def spend_curve(runs: Iterable[RunCost], now: float, max_points: int = 500) -> list[tuple[float, Amount]]:
    """Cumulative spend at every start and end (a sweep: spend grows at the summed hourly rate
    of what runs between two such times); thinned to about `max_points`, the last kept."""
    events: dict[float, Amount] = {}
    for r in runs:
        end = now if r.ended is None else r.ended
        if end <= r.started:
            continue
        events[r.started] = events.get(r.started, Amount()) + r.hourly
        events[end] = events.get(end, Amount()) + r.hourly.times(-1.0)
    points, total, rate, last = [], Amount(), Amount(), None
    for t in sorted(events):
        if last is not None:
            total = total + rate.times((t - last) / 3600.0)
        rate, last = rate + events[t], t
        points.append((t, total))
    step = max(1, len(points) // max_points)
    return points[::step] + ([points[-1]] if points and (len(points) - 1) % step else [])


def spend_dimensions(limits: Mapping[str, float], spent: Amount) -> list[str]:
    """What to draw spend in: the budget's dimensions; without a budget GPU-hours, or CPU-hours
    for a campaign that used no GPU. Not energy: it is measured per attempt, not an hourly rate
    a curve could follow (the report's energy figures are in its summary)."""
    priced = [d for d in limits if d != "energy_kwh"]
    if priced:
        return priced
    return ["gpu_hours" if spent.gpu_hours > 0 else "cpu_hours"]


def metric_names(rows: Iterable[MetricRow]) -> list[str]:
    """Every metric reported, in the order first seen."""
    return list(dict.fromkeys(r[3] for r in rows))


def default_metric(settings: CampaignSettings, names: Sequence[str]) -> str | None:
    """The campaign's `objective:`, else the metric rungs promote by, else the first one reported."""
    if settings.objective:
        return settings.objective.metric
    for rung in settings.rungs:
        if rung.promote is not None and rung.promote.metric:
            return rung.promote.metric
    return names[0] if names else None


def curves_by_rung(rows: Iterable[MetricRow], name: str, settings: CampaignSettings) -> list[RungCurves]:
    """One entry per rung (every rung, even one with no curve yet), each task's `name` curve in
    its task's rung."""
    curves = curves_by_task(((r[0], r[2], r[3], r[4]) for r in rows), name)
    out = [RungCurves(i, label, {}) for i, label in enumerate(rung_names(settings))]
    for task, curve in sorted(curves.items()):
        rung = rung_of(task, settings)
        if rung >= len(out):  # a task beyond the named rungs: shown rather than dropped
            out.extend(RungCurves(i, f"rung{i}", {}) for i in range(len(out), rung + 1))
        out[rung].curves[task] = curve
    return out
