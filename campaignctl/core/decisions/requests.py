"""Standing requests: what earlier ticks' utilisation and fallback decisions still ask of a
task, rebuilt from the decision log each tick (level-triggered, nothing kept elsewhere). Pure.

- `resize_next` → the task's next attempt gets these cpus_per_task / gpus (TaskView.adjust);
- `cancel` (applied) → when the attempt shows CANCELLED, resubmit it with the replacement
  resources (TaskView.replacements); a state-filtered cancel of an element that had started
  meanwhile did nothing, so a PENDING-only replacement needs an attempt that never ran;
- (token, rule) pairs already decided, so a rule fires once per attempt; fallback moves per task.
  An early-stopping `stop` counts only when enforced: its shadow proposal is logged once per
  policy digest by governance, so promoting the rule lets it act on the same attempt.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from campaignctl.core.decisions.action_records import Cancel, ResizeNext, record_of
from campaignctl.core.decisions.decision import Replacement, TaskView
from campaignctl.core.model.params import SCALAR_TYPES

STANDING_ACTIONS = ("resize_next", "cancel", "stop")


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    task_index: int
    token: str
    rule: str
    action: str
    params: Mapping[str, object]
    reason: str
    status: str  # the decision's outcome: applied | failed | pending


@dataclass(frozen=True, slots=True)
class Requests:
    adjust: dict[int, dict[str, object]] = field(default_factory=dict)
    replacements: dict[str, Replacement] = field(default_factory=dict)
    fired: set[tuple[str, str]] = field(default_factory=set)
    cancel_requested: set[str] = field(default_factory=set)
    moves: Counter[int] = field(default_factory=Counter)
    cluster_moves: Counter[int] = field(default_factory=Counter)  # by task: moves to another cluster


def standing_requests(rows: Iterable[LoggedRequest]) -> Requests:
    out = Requests()
    for r in rows:  # oldest first: a later request overrides an earlier one
        if r.action == "stop" and r.status == "proposed":
            continue
        out.fired.add((r.token, r.rule))
        p = record_of(r.action, r.params)
        if isinstance(p, ResizeNext) and r.status == "applied":  # not a shadow proposal, nor one awaiting approval
            out.adjust.setdefault(r.task_index, {}).update(
                {k: v[1] for k, v in p.changes.items() if k in ("cpus_per_task", "gpus")})
        elif isinstance(p, Cancel):
            out.cancel_requested.add(r.token)
            if r.rule == "gpu_fallback":
                out.moves[r.task_index] += 1
            elif r.rule == "move":
                out.cluster_moves[r.task_index] += 1
            if r.status == "applied" and p.replacement is not None:
                chosen = p.replacement_params
                out.replacements[r.token] = Replacement(
                    r.rule, p.replacement, r.reason, p.only_if,
                    None if chosen is None else {k: v for k, v in chosen.items() if isinstance(v, SCALAR_TYPES)},
                    p.to_cluster)
    return out


def with_requests(views: Sequence[TaskView], requests: Requests) -> list[TaskView]:
    if not requests.adjust and not requests.replacements:
        return list(views)
    return [replace(v, adjust=requests.adjust.get(v.index, {}),
                    replacements={a.token: requests.replacements[a.token] for a in v.attempts
                                  if a.token in requests.replacements})
            if v.index in requests.adjust or any(a.token in requests.replacements for a in v.attempts) else v
            for v in views]
