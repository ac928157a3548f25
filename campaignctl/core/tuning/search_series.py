"""What the report draws of a search: each told trial's value in the order trials were asked,
the best so far, and each trial's parameters placed on their range (0 the low end, 1 the high
end; a log-scale range on its log; a categorical choice at its place in the list). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from campaignctl.core.model.params import Scalar
from campaignctl.core.spec.search_spec import Dimension, SearchSpec
from campaignctl.core.tuning.search import COMPLETE, Trial


@dataclass(frozen=True, slots=True)
class TrialPoint:
    number: int
    value: float
    coords: tuple[float, ...]  # one per dimension of the space, in its order, 0..1


@dataclass(frozen=True, slots=True)
class SearchSeries:
    metric: str
    goal: str
    dimensions: tuple[str, ...]
    points: tuple[TrialPoint, ...]  # the trials told COMPLETE, by number
    best_so_far: tuple[tuple[int, float], ...]  # (trial number, best value up to it)
    failed: int  # told failed or pruned

    @property
    def best(self) -> TrialPoint | None:
        if not self.points:
            return None
        pick = min if self.goal == "min" else max
        return pick(self.points, key=lambda p: p.value)


def search_series(search: SearchSpec, trials: Sequence[Trial]) -> SearchSeries:
    points = tuple(TrialPoint(t.number, t.value, tuple(_place(d, t.params.get(d.name)) for d in search.space))
                   for t in trials if t.state == COMPLETE and t.value is not None)
    best: list[tuple[int, float]] = []
    for p in points:
        better = not best or (p.value < best[-1][1] if search.goal == "min" else p.value > best[-1][1])
        best.append((p.number, p.value if better else best[-1][1]))
    failed = sum(1 for t in trials if t.state not in (COMPLETE, "RUNNING"))
    return SearchSeries(search.metric, search.goal, tuple(d.name for d in search.space), points, tuple(best), failed)


def _place(d: Dimension, value: Scalar | None) -> float:
    if d.choices:
        return d.choices.index(value) / max(1, len(d.choices) - 1) if value in d.choices else 0.0
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return 0.0
    if d.log and value > 0:
        return (math.log(value) - math.log(d.low)) / (math.log(d.high) - math.log(d.low))
    return (value - d.low) / (d.high - d.low)
