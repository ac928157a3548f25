"""Replayed decisions against the recorded ones: which were reproduced, which differ, and what
each side's retries would cost at worst. Pure.

Two decisions are the same decision when they answer the same attempt with the same kind of
act: an answer (resubmit or give up) or an in-place resize. Made at another tick, it still is
the same decision, noted as delayed (a longer backoff, say). Same attempt but another action,
rule or resources: changed. The rest is only-actual or only-replay.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from campaignctl.core.decisions.action_records import ActionRecord, Ask, Cancel, Pair, Resubmit, Tell, changes_of
from campaignctl.core.decisions.answers import ANSWERS
from campaignctl.core.decisions.recorded import RecordedDecision
from campaignctl.core.governance.replay import ReplayedDecision
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.cost import Amount, hourly

CHANGED, ONLY_ACTUAL, ONLY_REPLAY, DELAYED = "changed", "only_actual", "only_replay", "delayed"


@dataclass(frozen=True, slots=True)
class Side:
    """One side's decision for an attempt."""

    tick_id: int
    rule: str
    action: str
    changes: Mapping[str, Any]  # {field: [old, new]} of the retry or of the resize
    resources: Resources | None  # resubmit: the next attempt's; resize_pending: the new ones
    reason: str
    cost: Amount = field(default_factory=Amount)  # resubmit: the new attempt at its time limit


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str  # changed | only_actual | only_replay | delayed (same decision, another tick)
    task_index: int
    attempt_token: str
    attempt: int | None  # the attempt's number
    actual: Side | None
    replay: Side | None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Comparison:
    differences: tuple[Difference, ...]
    reproduced: int  # recorded decisions the replay made the same (delayed ones included)
    actual: int
    replayed: int
    actual_cost: Amount
    replay_cost: Amount

    @property
    def cost_delta(self) -> Amount:
        return self.replay_cost + self.actual_cost.times(-1.0)

    @property
    def identical(self) -> bool:
        return not self.differences

    def made_by_one_side(self) -> tuple[dict[str, int], dict[str, int]]:
        """"rule → action" → how many, of the decisions only the recorded side made and of those
        only the replay made (a changed decision of another rule or action counts on both)."""
        actual: dict[str, int] = {}
        replayed: dict[str, int] = {}
        for d in self.differences:
            if d.kind == DELAYED or (d.actual and d.replay and (d.actual.rule, d.actual.action)
                                     == (d.replay.rule, d.replay.action)):
                continue
            for side, counts in ((d.actual, actual), (d.replay, replayed)):
                if side is not None:
                    key = f"{side.rule} → {side.action}"
                    counts[key] = counts.get(key, 0) + 1
        return actual, replayed


def worst_case(resources: Resources, prices: Prices) -> Amount:
    """A new attempt running to its time limit on what it asks for."""
    return hourly(resources, "", prices).times(resources.time_min / 60)


def compare(actual: Sequence[RecordedDecision], replayed: Sequence[ReplayedDecision], prices: Prices,
            actual_resources: Callable[[RecordedDecision], Resources | None],
            attempt_numbers: Mapping[str, int]) -> Comparison:
    """`actual_resources`: the resources a recorded decision gave (its retry's or its resize's)."""
    actual_sides = {d.id: _actual_side(d, actual_resources(d), prices) for d in actual}
    replay_sides = [_replay_side(r, prices) for r in replayed]
    by_key: dict[tuple[str, str], tuple[list[RecordedDecision], list[tuple[ReplayedDecision, Side]]]] = {}
    for d in actual:
        by_key.setdefault(_key(d.attempt_token, d.action), ([], []))[0].append(d)
    for made, side in zip(replayed, replay_sides, strict=True):
        by_key.setdefault(_key(made.decision.attempt_token, made.decision.action), ([], []))[1].append((made, side))
    differences, reproduced = [], 0
    for (token, _), (ours, theirs) in by_key.items():
        number = attempt_numbers.get(token)
        for i in range(max(len(ours), len(theirs))):
            a = ours[i] if i < len(ours) else None
            r = theirs[i] if i < len(theirs) else None
            diff = _classify(token, number, a, actual_sides[a.id] if a else None, r)
            reproduced += a is not None and r is not None and (diff is None or diff.kind == DELAYED)
            if diff is not None:
                differences.append(diff)
    differences.sort(key=lambda d: (_tick(d), d.task_index, d.attempt_token))
    return Comparison(tuple(differences), reproduced, len(actual), len(replayed),
                      _total(actual_sides.values()), _total(s for s in replay_sides))


def _key(token: str, action: str) -> tuple[str, str]:
    return token, "answer" if action in ANSWERS else action


def _classify(token: str, number: int | None, a: RecordedDecision | None, actual: Side | None,
              r: tuple[ReplayedDecision, Side] | None) -> Difference | None:
    replay = r[1] if r else None
    task = a.task_index if a else r[0].decision.task_index if r else -1
    if actual is None or replay is None:
        return Difference(ONLY_REPLAY if actual is None else ONLY_ACTUAL, task, token, number, actual, replay)
    same = (actual.rule, actual.action, _plain(actual.changes)) == (replay.rule, replay.action,
                                                                    _plain(replay.changes))
    note = _delay(actual.tick_id, replay.tick_id)
    if same:
        return None if not note else Difference(DELAYED, task, token, number, actual, replay, note)
    return Difference(CHANGED, task, token, number, actual, replay, note)


def _delay(actual_tick: int, replay_tick: int) -> str:
    if actual_tick == replay_tick:
        return ""
    when = "later" if replay_tick > actual_tick else "earlier"
    return f"replay decides {when}: tick {replay_tick}, not tick {actual_tick}"


def _changes(p: ActionRecord) -> dict[str, Pair]:
    """Resource changes and task-parameter changes (a GPU OOM's smaller batch) alike; what a
    search asked (each sampled value) or told (the trial's state and value)."""
    if isinstance(p, Ask):
        return {k: (None, v) for k, v in p.params.items()}
    if isinstance(p, Tell):
        return {"state": (None, p.state), "value": (None, p.value)}
    return {**changes_of(p), **(p.param_changes if isinstance(p, (Resubmit, Cancel)) else {})}


def _actual_side(d: RecordedDecision, resources: Resources | None, prices: Prices) -> Side:
    changes = _changes(d.typed)
    cost = worst_case(resources, prices) if d.action == "resubmit" and resources else Amount()
    return Side(d.tick_id, d.rule, d.action, _plain(changes), resources, d.reason, cost)


def _replay_side(r: ReplayedDecision, prices: Prices) -> Side:
    d = r.decision
    changes = _changes(d.typed)
    cost = worst_case(d.resources, prices) if d.action == "resubmit" and d.resources else Amount()
    return Side(r.tick_id, d.rule, d.action, _plain(changes), d.resources, d.reason, cost)


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    """As the log stores it (JSON: tuples are lists), so both sides compare alike."""
    return dict(json.loads(json.dumps(value, sort_keys=True, default=str)))


def _total(sides: Any) -> Amount:
    total = Amount()
    for side in sides:
        total += side.cost
    return total


def _tick(d: Difference) -> int:
    return min(s.tick_id for s in (d.actual, d.replay) if s is not None)


def resubmitted_resources(old: Resources, changes: Mapping[str, Any]) -> Resources:
    """What a recorded resubmit gave the next attempt, from the attempt's resources and the
    decision's `changes` (used when its retry submission is not in the store)."""
    return replace(old, **{k: v[1] for k, v in changes.items() if k in Resources.__slots__})
