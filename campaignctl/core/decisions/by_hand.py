"""Decisions a person takes with `cancel` and `retry`, written to the decision log like a tick's
(rule MANUAL, so `policy replay` counts them as history, not as the policy's). Pure.

cancel: a task whose latest attempt is queued or running is stopped (`scancel` of that element;
the stop answers the attempt for good); one whose latest attempt ended unanswered (a failure
waiting for its backoff) is given up. A task already settled is left as it is.
retry: a task whose latest attempt ended and was answered for good (given up, stopped, cancelled
by hand or by someone, abandoned) gets a new attempt under the current revision's resources and
parameters; a task still queued or running, or completed, is not retried."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.decisions.action_records import GiveUp, Retry, Stop
from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.resources import Resources
from campaignctl.core.slurm.observe import ABANDONED, FINAL, UNKNOWN

MANUAL_RULE = "manual"
# a campaign cancelled whole: `cancelling` while its stopped attempts end (ticks observe it and
# decide nothing), then `cancelled`
CANCELLING, CANCELLED = "cancelling", "cancelled"
RETRY = "retry"  # a new attempt a person asked for (the attempt it follows keeps its own answer)
ENDED = FINAL | {UNKNOWN, ABANDONED}


@dataclass(frozen=True, slots=True)
class Skipped:
    task_index: int
    why: str


def cancel_decisions(views: Sequence[TaskView], tasks: Sequence[int], who: str, reason: str,
                     whole: bool = False) -> tuple[list[Decision], list[Skipped]]:
    """`whole`: the campaign is cancelled, and its submissions that have not reached Slurm are
    dropped (by the caller): their tasks are given up here."""
    decisions: list[Decision] = []
    skipped: list[Skipped] = []
    said = f"cancelled by {who}" + (f": {reason}" if reason else "")
    for t, a in _latest(views, tasks, skipped):
        inputs: dict[str, object] = {"job_id": a.job_id, "state": a.state, "attempt": a.number, "by": who}
        if a.state in ENDED:
            if a.decided:
                skipped.append(Skipped(t, f"already settled ({a.state})"))
            else:
                decisions.append(Decision(t, a.token, MANUAL_RULE, "give_up",
                                          f"{said}; attempt {a.number} had ended {a.state}", inputs, GiveUp()))
        elif a.job_id is None and whole:
            decisions.append(Decision(t, a.token, MANUAL_RULE, "give_up",
                                      f"{said}; attempt {a.number} had not reached Slurm (its submission "
                                      "is dropped)", inputs, GiveUp()))
        elif a.job_id is None:
            skipped.append(Skipped(t, "its attempt has not reached Slurm yet (cancel the whole campaign "
                                      "to drop submissions still waiting)"))
        elif a.decided:  # an applied stop: a second scancel, and a second log entry, would say nothing new
            skipped.append(Skipped(t, f"already being stopped ({a.state})"))
        else:
            # no state filter: a pending element that starts meanwhile is cancelled all the same;
            # `seen` PENDING tells a 24.11 tick why accounting may hold no record of it
            decisions.append(Decision(t, a.token, MANUAL_RULE, "stop", f"{said} ({a.state})", inputs,
                                      Stop(seen=a.state)))
    return decisions, sorted(skipped, key=lambda s: s.task_index)


def retry_decisions(views: Sequence[TaskView], tasks: Sequence[int], resources: Mapping[int, Resources],
                    who: str, reason: str) -> tuple[list[Decision], list[Skipped]]:
    """`resources`: each task's first-attempt resources under the current revision."""
    decisions: list[Decision] = []
    skipped: list[Skipped] = []
    said = f"retried by {who}" + (f": {reason}" if reason else "")
    for t, a in _latest(views, tasks, skipped):
        if a.state == "COMPLETED":
            skipped.append(Skipped(t, "completed"))
        elif a.state not in ENDED:
            skipped.append(Skipped(t, f"its attempt {a.number} is {a.state}; cancel it first to run it again"))
        elif not a.decided:
            skipped.append(Skipped(t, f"attempt {a.number} ended {a.state} and the policy has not answered it "
                                      "yet; the next tick does (retry is for tasks given up or cancelled)"))
        else:
            decisions.append(Decision(t, a.token, MANUAL_RULE, RETRY,
                                      f"{said}: attempt {a.number + 1} under the current revision "
                                      f"(attempt {a.number} ended {a.state})",
                                      {"job_id": a.job_id, "state": a.state, "attempt": a.number, "by": who},
                                      Retry(), resources[t]))
    return decisions, sorted(skipped, key=lambda s: s.task_index)


def _latest(views: Sequence[TaskView], tasks: Sequence[int], skipped: list[Skipped]) -> list[tuple[int, AttemptView]]:
    """Each named task's latest attempt; a task without a view completed on its first attempt
    (core/slurm/observe.task_views leaves those out) and is noted in `skipped`."""
    by_index = {v.index: v for v in views}
    skipped += [Skipped(t, "completed") for t in tasks if t not in by_index]
    return [(t, by_index[t].latest) for t in tasks if t in by_index]

