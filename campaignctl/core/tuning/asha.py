"""Asynchronous successive halving: a search's rungs. Pure.

A progressive campaign of a grid promotes *synchronously* (core/tuning/ladder.py): once every config in a
rung has settled, the best ⌊n/η⌋ go on. A search's trials arrive one by one, so its rungs promote
*asynchronously* (ASHA, Li et al. 2020): at every tick, a trial whose rung-k result ranks in the top
⌊n/η⌋ of the n rung-k results so far is promoted to rung k + 1, at once, if it was not already.
No slot waits for a rung's slowest trial; the price is that an early trial may be promoted on
fewer results than a synchronous rung would have ranked it among.

`search: {promotion: sync}` offers the synchronous ladder instead: every trial is asked and settles
in the first rung, then its best ⌊n/η⌋ (at least one) go on, and so on up.

Trial t of rung k is task k × trials + t; a trial's rung k+1 task exists once it was promoted
(its submission is written with the promotion). Higher rungs are served first, as ASHA does, and
promotions before new trials. When the search has asked every trial and nothing runs, a rung
with results but none promoted yet promotes its best (the ⌊n/η⌋ rounded up to at least one), so
the search ends with a trial at its top rung."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from campaignctl.core.model.training_metrics import Curve
from campaignctl.core.spec.rungs import Rung
from campaignctl.core.tuning.ladder import TaskEnd, rung_value


@dataclass(frozen=True, slots=True)
class Promotable:
    trial: int
    from_rung: int
    token: str  # its rung-k task's latest attempt
    value: float
    rank: int  # among the rung's results so far, 1 the best
    results: int  # the rung's results so far (n)
    keep: int  # ⌊n/η⌋ (at least one at the end)


def promotable(rungs: tuple[Rung, ...], trials: int, ends: Mapping[int, TaskEnd],
               curves: Mapping[str, Mapping[int, Curve]], at_end: bool, sync: bool = False) -> list[Promotable]:
    """Trials to promote now, highest rung first, best first within a rung. `curves`: each
    promoting metric's curves by task; `at_end`: every trial asked and nothing runs. `sync`: the
    lowest rung nobody was promoted from yet promotes its best ⌊n/η⌋ (at least one), and only at
    the end: a synchronous ladder over the search's trials."""
    if sync:
        if not at_end:
            return []
        k = next((k for k in range(len(rungs) - 1) if not _promoted_from(k, trials, ends)), None)
        return [] if k is None else _ranked(rungs, k, trials, ends, curves, True)
    out: list[Promotable] = []
    for k in reversed(range(len(rungs) - 1)):
        out += [p for p in _ranked(rungs, k, trials, ends, curves, at_end) if (k + 1) * trials + p.trial not in ends]
    return out


def _promoted_from(k: int, trials: int, ends: Mapping[int, TaskEnd]) -> bool:
    return any((k + 1) * trials + t in ends for t in range(trials))


def _ranked(rungs: tuple[Rung, ...], k: int, trials: int, ends: Mapping[int, TaskEnd],
            curves: Mapping[str, Mapping[int, Curve]], at_end: bool) -> list[Promotable]:
    """Rung k's top ⌊n/η⌋ of its results so far, best first (ties to the lower trial); at the end,
    a rung nobody was promoted from keeps at least one."""
    promote = rungs[k].promote
    assert promote is not None and promote.eta is not None  # spec validation: a search's rungs use eta
    by_metric = curves.get(promote.metric, {})
    done: dict[int, float] = {}
    for t in range(trials):
        end = ends.get(k * trials + t)
        if end is not None and end.state == "COMPLETED":
            value = rung_value(by_metric.get(k * trials + t, ()), promote)
            if value is not None:
                done[t] = value
    keep = math.floor(len(done) / promote.eta + 1e-9)
    if at_end and done and not _promoted_from(k, trials, ends):
        keep = max(1, keep)
    ranked = sorted(done, key=lambda t: (done[t] if promote.goal == "min" else -done[t], t))
    return [Promotable(t, k, ends[k * trials + t].token, done[t], rank, len(done), keep)
            for rank, t in enumerate(ranked[:keep], 1)]


def promoting_metrics(rungs: tuple[Rung, ...]) -> set[str]:
    return {r.promote.metric for r in rungs if r.promote is not None}
