"""Campaign-wide concurrency. `array.max_parallel` caps how many of a campaign's tasks run at
once, but Slurm's throttle (`--array=…%N`, `ArrayTaskThrottle`) is per array, and retries add
arrays. Each tick shares the cap out over the arrays that still have pending elements, oldest
first, and changes the throttles that differ (`scontrol update JobId=<array> ArrayTaskThrottle=N`).
A throttle cannot be 0 (0 means unlimited), so every array with pending work keeps at least 1:
with k such arrays the campaign may exceed the cap by at most k-1 while the cap is used up. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.decisions.action_records import Throttle
from campaignctl.core.decisions.decision import Decision, TaskView


@dataclass(frozen=True, slots=True)
class ArrayLoad:
    array_job_id: str
    running: int
    pending: int
    first_pending_task: int | None
    first_pending_token: str | None


def array_loads(views: Sequence[TaskView]) -> list[ArrayLoad]:
    """Running and pending elements per array, from each task's latest attempt, oldest array first."""
    loads: dict[str, list] = {}
    for view in views:
        latest = view.latest
        array = latest.array_job_id
        if array is None or latest.state not in ("RUNNING", "PENDING"):
            continue
        load = loads.setdefault(array, [0, 0, None, None])
        if latest.state == "RUNNING":
            load[0] += 1
        else:
            load[1] += 1
            if load[2] is None or view.index < load[2]:
                load[2], load[3] = view.index, latest.token
    return [ArrayLoad(a, *v) for a, v in sorted(loads.items(), key=lambda kv: int(kv[0]))]


def running_now(views: Sequence[TaskView]) -> int:
    return sum(1 for v in views if v.latest.state == "RUNNING")


def plan_throttles(views: Sequence[TaskView], throttles: Mapping[str, int | None],
                   max_parallel: int | None, why: str = "") -> list[Decision]:
    """One `throttle` decision per array whose throttle should change; `throttles` holds each
    array's current throttle (None: unthrottled); `why` names the cap when it is not the spec's
    max_parallel (the budget's admission limit)."""
    if not max_parallel:
        return []
    loads = array_loads(views)
    available = max_parallel - sum(a.running for a in loads if a.pending == 0)
    decisions = []
    for load in loads:
        if load.pending == 0 or load.first_pending_token is None or load.first_pending_task is None:
            continue
        work = load.running + load.pending
        wanted = max(1, available)
        available = max(0, available - work)
        current = throttles.get(load.array_job_id)
        if min(current or work, work) == min(wanted, work):
            continue  # both let every remaining element run: no change worth a Slurm call
        reason = (f"{why or f'campaign max_parallel {max_parallel}'}: array {load.array_job_id} "
                  f"({load.running} running, {load.pending} pending) may run {wanted} at once "
                  f"(was {current if current else 'unlimited'}).")
        decisions.append(Decision(
            load.first_pending_task, load.first_pending_token, "max_parallel", "throttle", reason,
            {"array_job_id": load.array_job_id, "running": load.running, "pending": load.pending,
             "max_parallel": max_parallel, "throttle": current, "why": why or "max_parallel",
             "arrays": {a.array_job_id: [a.running, a.pending] for a in loads}},
            Throttle(array_job_id=load.array_job_id, throttle=wanted, changes={"throttle": (current, wanted)})))
    return decisions
