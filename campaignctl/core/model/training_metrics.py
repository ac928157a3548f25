"""Training metrics that tasks report (JSON lines in `$CAMPAIGNCTL_METRICS`) → points and
per-task curves. Pure: the reader hands in complete lines.

Line format: {"step": 100, "val_loss": 0.41, "acc": 0.83, "t": 1.764e9}: one `step` (a
non-negative integer), any number of named finite numbers, and optionally the time `t`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.base import bounded_json

METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]{0,63}$")
RESERVED = ("step", "t")
MODES = ("min", "max")


@dataclass(frozen=True, slots=True)
class MetricPoint:
    step: int
    name: str
    value: float
    t: float | None = None


@dataclass(frozen=True, slots=True)
class ParsedLines:
    points: tuple[MetricPoint, ...]
    bad_lines: int  # not JSON, no valid step, or no valid metric at all


def parse_metric_lines(lines: Iterable[str]) -> ParsedLines:
    """Points from complete lines; a bad line is counted and skipped, a bad field dropped."""
    points: list[MetricPoint] = []
    bad = 0
    for line in lines:
        found = _points_of(line)
        if found:
            points.extend(found)
        elif line.strip():
            bad += 1
    return ParsedLines(tuple(points), bad)


def _points_of(line: str) -> list[MetricPoint]:
    try:
        record = bounded_json.loads(line)
    except ValueError:  # not JSON, or what a job could write to stop a reader (core/base/bounded_json.py)
        return []
    if not isinstance(record, dict):
        return []
    step, t = record.get("step"), record.get("t")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return []
    return [MetricPoint(step, name, number, _number(t)) for name, value in record.items()
            if name not in RESERVED and METRIC_NAME.match(name) and (number := _number(value)) is not None]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


Curve = tuple[tuple[int, float], ...]  # (step, value) in report order


def better(a: float, b: float, mode: str) -> bool:
    """`a` strictly better than `b` when lower (min) or higher (max) is better."""
    return a < b if mode == "min" else a > b


def best_until(curve: Curve, step: int, mode: str) -> float | None:
    """The best value reported at or before `step` (None if nothing was)."""
    values = [v for s, v in curve if s <= step]
    if not values:
        return None
    return min(values) if mode == "min" else max(values)


def final_value(curve: Curve) -> float | None:
    """The last value reported: what a rung's promotion ranks by."""
    return curve[-1][1] if curve else None


def last_step(curve: Curve) -> int | None:
    return max(s for s, _ in curve) if curve else None


def curves_by_task(rows: Iterable[tuple[int, int, str, float]], name: str) -> dict[int, Curve]:
    """(task index, step, name, value) rows in report order (attempt by attempt, as ingested)
    → the `name` curve of each task. A retry resumes the same task's curve."""
    out: dict[int, list[tuple[int, float]]] = {}
    for task, step, metric, value in rows:
        if metric == name:
            out.setdefault(task, []).append((step, value))
    return {task: tuple(points) for task, points in out.items()}


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def describe(values: Mapping[int, float | None]) -> dict[str, float | None]:
    """JSON-ready evidence: task index (as text) → value."""
    return {str(k): v for k, v in sorted(values.items())}
