"""Plan a rollback to revision T: the compensating actions that give work which has not started
the resources it would have under T. Pure; every step is a Decision the Actor carries out.

- An attempt changed in place after T (a pending resize, or an earlier rollback's restore) gets,
  per field, the value it had before the first such change: undoing every change since T in
  reverse order leaves exactly that, so rolling back a rollback works the same way.
- A retry submitted after T gets what T's policy answers to the same failure (the pure
  `decide_task`, as replay uses it): its resources and its task parameters (a rule's `params:`
  may have halved a batch); when T's policy would have given up, it is left alone and the plan
  says so.
- Memory, time and CPUs change in place (`scontrol update`); anything else (GPU type or count,
  partition, excluded nodes, task parameters: they are in the element's argv) cannot, so the
  element is cancelled while still pending and a later tick resubmits it with the restored
  resources and parameters.
- Running and finished attempts are never touched; Slurm itself refuses to update a job that
  started in between, and the cancel is `--state=PENDING`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime

from campaignctl.core.decisions.action_records import Cancel, Pair, ResizeNext, ResizePending, Resubmit
from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.model.params import SCALAR_TYPES, Scalar
from campaignctl.core.policy.policy import Policy
from campaignctl.core.resources import with_fields
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.decide import decide_task

RULE = "rollback"
IN_PLACE = ("mem_mb", "time_min", "cpus_per_task")  # what `scontrol update` can set on a pending job
NOT_STARTED = ("PENDING", "SUBMITTED")


@dataclass(frozen=True, slots=True)
class LoggedChange:
    """An applied decision that changed an attempt's resources, as the log recorded it."""

    decision_id: int
    revision: int
    token: str  # the attempt whose resources it set (for a resubmit: the retry it created)
    action: str  # resize_pending | resubmit | resize_next
    changes: Mapping[str, Sequence[object]]  # field → [old, new]
    task_index: int = -1
    replacement: bool = False  # a resubmit that replaced an attempt campaignctl cancelled to move it


@dataclass(frozen=True, slots=True)
class RollbackPlan:
    target: int
    steps: list[Decision] = field(default_factory=list)
    left_alone: list[str] = field(default_factory=list)  # why some pending work keeps its resources


def plan_rollback(target: int, target_policy: Policy, views: Sequence[TaskView],
                  changes: Iterable[LoggedChange], far_future: datetime) -> RollbackPlan:
    """`changes`: applied changes in log order; only those made under revisions after `target` count."""
    later = [c for c in changes if c.revision > target]
    by_token: dict[str, list[LoggedChange]] = {}
    for c in later:
        by_token.setdefault(c.token, []).append(c)
    plan = RollbackPlan(target)
    for view in views:
        latest = view.latest
        if latest.state not in NOT_STARTED or latest.job_id is None or latest.token not in by_token:
            continue
        own = by_token[latest.token]
        retry = next((c for c in own if c.action == "resubmit"), None)
        wanted: Resources | None
        params: Mapping[str, Scalar] = latest.params
        if retry is not None and retry.replacement:  # a move to other resources: move it back
            wanted = _undo(latest.resources, [c for c in own if c.action in ("resubmit", "resize_pending")])
            undone = [c.decision_id for c in own]
        elif retry is not None:
            answer = _target_policy_answer(view, target_policy, far_future)
            if answer is None:
                plan.left_alone.append(f"task {view.index}: revision {target}'s policy would have given up "
                                       f"instead of retrying; the pending retry {latest.job_id} is left alone")
                continue
            wanted, params = answer
            undone = [retry.decision_id, *(c.decision_id for c in own if c is not retry)]
        else:
            wanted = _undo(latest.resources, [c for c in own if c.action == "resize_pending"])
            undone = [c.decision_id for c in own if c.action == "resize_pending"]
        step = _restore(view, latest, wanted, params, target, undone)
        if step is not None:
            plan.steps.append(step)
    plan.steps.extend(_undo_next_attempt_notes(later, {v.index: v for v in views}, target))
    return plan


def _undo(current: Resources, changes: Sequence[LoggedChange]) -> Resources:
    """Per field, the value before the first change: what undoing them all in reverse leaves."""
    first: dict[str, object] = {}
    for c in changes:
        for key, (old, _new) in c.changes.items():
            first.setdefault(key, old)
    return with_fields(current, first)


def _target_policy_answer(view: TaskView, policy: Policy,
                          far_future: datetime) -> tuple[Resources, Mapping[str, Scalar]] | None:
    """The resources and task parameters revision T's policy gives the retry of the same failure
    (None: it gives up). No `task_params` in its decision: the failed attempt's own, unchanged."""
    failed_index = len(view.attempts) - 2  # the attempt whose failure the pending retry answers
    if failed_index < 0:
        return None
    failed = replace(view.attempts[failed_index], decided=False)
    cut = TaskView(view.index, (*view.attempts[:failed_index], failed))
    decision = decide_task(cut, policy, far_future)  # far future: a backoff is not what is asked here
    if decision is None or decision.action != "resubmit" or decision.resources is None:
        return None
    p = decision.typed
    chosen = p.task_params if isinstance(p, Resubmit) else None
    if chosen is None:
        return decision.resources, failed.params
    return decision.resources, {k: v for k, v in chosen.items() if isinstance(v, SCALAR_TYPES)}


def _restore(view: TaskView, latest: AttemptView, wanted: Resources, params: Mapping[str, Scalar],
             target: int, undone: list[int]) -> Decision | None:
    current = latest.resources
    changes: dict[str, Pair] = {k: (v, getattr(wanted, k)) for k, v in asdict(current).items()
                                if getattr(wanted, k) != v}
    param_changes: dict[str, Pair] = {k: (latest.params.get(k), v) for k, v in params.items()
                                      if latest.params.get(k) != v}
    if not changes and not param_changes:
        return None
    what = ", ".join(f"{k} {a} → {b}" for k, (a, b) in (changes | param_changes).items())
    inputs = {"job_id": latest.job_id, "state": latest.state, "attempt": latest.number,
              "target_revision": target, "undoes": undone}
    if set(changes) <= set(IN_PLACE) and not param_changes:
        return Decision(view.index, latest.token, RULE, "resize_pending",
                        f"rollback to revision {target}: pending {latest.job_id} gets {what} back (scontrol update).",
                        inputs, ResizePending(changes=changes, array_job_id=latest.array_job_id or "",
                                              resources=wanted), wanted)
    return Decision(view.index, latest.token, RULE, "cancel",
                    f"rollback to revision {target}: {what} cannot change on a queued job, so pending "
                    f"{latest.job_id} is cancelled and resubmitted with them.",
                    inputs, Cancel(only_if="PENDING", replacement=wanted, changes=changes,
                                   replacement_params=dict(params) if param_changes else None,
                                   param_changes=param_changes))


def _undo_next_attempt_notes(later: Sequence[LoggedChange], views: Mapping[int, TaskView],
                             target: int) -> list[Decision]:
    """A `resize_next` note made after T still shapes the task's next attempt: a later note with
    the values from before the first one cancels it (the log keeps both)."""
    first: dict[int, dict[str, object]] = {}
    ids: dict[int, list[int]] = {}
    for c in later:
        if c.action == "resize_next":
            for key, (old, _new) in c.changes.items():
                first.setdefault(c.task_index, {}).setdefault(key, old)
            ids.setdefault(c.task_index, []).append(c.decision_id)
    out = []
    for task, fields in sorted(first.items()):
        view = views.get(task)
        token = view.latest.token if view else ""
        changes: dict[str, Pair] = {k: ("as noted", v) for k, v in fields.items()}
        out.append(Decision(task, token, RULE, "resize_next",
                            f"rollback to revision {target}: the task's next attempt gets "
                            + ", ".join(f"{k} {v}" for k, v in fields.items()) + " again.",
                            {"target_revision": target, "undoes": ids[task]}, ResizeNext(changes=changes)))
    return out
