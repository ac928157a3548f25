"""Campaign-wide concurrency. `array.max_parallel` caps how many of a campaign's tasks run at
once, but Slurm's throttle (`--array=…%N`, `ArrayTaskThrottle`) is per array, and retries add
arrays. Each tick shares the cap out over the arrays that still have pending elements, oldest
first, and changes the throttles that differ (`scontrol update JobId=<array> ArrayTaskThrottle=N`).
A throttle cannot be 0 (0 means unlimited), so every array with pending work keeps at least 1:
with k such arrays the campaign may exceed the cap by at most k-1 while the cap is used up. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from campaignctl.core.decisions.action_records import Throttle
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.slurm import job_ref


class ArrayLoad(NamedTuple):  # a tuple: the simulator makes one per array with pending work each tick
    array_job_id: str
    running: int
    pending: int
    first_pending_task: int | None
    first_pending_token: str | None


@dataclass(frozen=True, slots=True)
class Loads:
    """What the throttles are shared out from: the campaign's arrays, oldest first (at least
    those with pending elements: the simulator counts no others), and its running tasks in all.
    `spent`: the running tasks of arrays with nothing left to start, when the arrays are not all
    there — then they may leave out any array behind the point where the cap is used up that
    `plan_throttles` would pass over (one at a time already: its throttle 1, or one element left)."""

    arrays: tuple[ArrayLoad, ...]
    running: int
    spent: int | None = None


def loads_of(views: Sequence[TaskView]) -> Loads:
    """Running and pending elements per array, from each task's latest attempt."""
    loads: dict[str, list] = {}
    running = 0
    for view in views:
        latest = view.latest
        if latest.state == "RUNNING":
            running += 1
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
    # oldest first: by cluster, then by id (a qualified id is no number: core/slurm/job_ref.py)
    arrays = [ArrayLoad(a, *v) for a, v in sorted(loads.items(), key=lambda kv: job_ref.order(kv[0]))]
    return Loads(tuple(arrays), running)


def plan_throttles(loads: Loads, throttles: Mapping[str, int | None],
                   max_parallel: int | None, why: str = "") -> list[Decision]:
    """One `throttle` decision per array whose throttle should change; `throttles` holds each
    array's current throttle (None: unthrottled); `why` names the cap when it is not the spec's
    max_parallel (the budget's admission limit)."""
    if not max_parallel:
        return []
    # what runs in arrays with nothing left to start is spent; the rest is shared out oldest first
    spent = loads.spent
    if spent is None:
        spent = loads.running - sum(running for _, running, pending, _, _ in loads.arrays if pending)
    available = max_parallel - spent
    decisions = []
    for load in loads.arrays:
        array_job_id, running, pending, first_task, first_token = load
        if not pending or first_token is None or first_task is None:
            continue
        work = running + pending
        current = throttles.get(array_job_id)
        if available <= 0 and (current == 1 or work == 1):
            continue  # the cap is used up and it runs one at a time already (a throttled campaign's retries)
        wanted, left = max(1, available), available
        available = max(0, available - work)
        if min(current or work, work) == min(wanted, work):
            continue  # both let every remaining element run: no change worth a Slurm call
        reason = (f"{why or f'campaign max_parallel {max_parallel}'}: array {array_job_id} "
                  f"({running} running, {pending} pending) may run {wanted} at once "
                  f"(was {current if current else 'unlimited'}).")
        decisions.append(Decision(
            first_task, first_token, "max_parallel", "throttle", reason,
            {"array_job_id": array_job_id, "running": running, "pending": pending,
             "max_parallel": max_parallel, "throttle": current, "why": why or "max_parallel",
             "spent": spent, "available": left},
            Throttle(array_job_id=array_job_id, throttle=wanted, changes={"throttle": (current, wanted)})))
    return decisions
