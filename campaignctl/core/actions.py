"""Decisions → action groups. Retries of one tick that share resources go out together as one
new array (chunked by MaxArraySize); in-place resizes of one array are one `scontrol update`
of exactly the decided pending elements; a throttle change is one `scontrol update` of an
array's ArrayTaskThrottle. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from campaignctl.core.decide import Decision
from campaignctl.core.plan import ArrayChunk, plan_chunks
from campaignctl.core.spec import Resources


@dataclass(frozen=True, slots=True)
class ResubmitGroup:
    token: str
    resources: Resources
    chunk: ArrayChunk
    decisions: tuple[Decision, ...]  # in array-index order


@dataclass(frozen=True, slots=True)
class ResizeGroup:
    token: str
    array_job_id: str
    resources: Resources  # what the pending elements get
    decisions: tuple[Decision, ...]

    @property
    def job_expression(self) -> str:
        """`12_[3,5]`: exactly the decided elements; the array index is the token's suffix."""
        indices = sorted(int(d.attempt_token.rsplit(".", 1)[1]) for d in self.decisions)
        return f"{self.array_job_id}_[{','.join(map(str, indices))}]"

    def scontrol_fields(self) -> list[str]:
        # MinMemoryNode is in MB; TimeLimit in minutes (scontrol(1), "update" of a pending job).
        return [f"MinMemoryNode={self.resources.mem_mb}", f"TimeLimit={self.resources.time_min}"]


@dataclass(frozen=True, slots=True)
class ThrottleGroup:
    token: str
    array_job_id: str
    throttle: int
    decision: Decision


@dataclass(frozen=True, slots=True)
class ActionPlan:
    resubmits: tuple[ResubmitGroup, ...]
    resizes: tuple[ResizeGroup, ...]
    give_ups: tuple[Decision, ...]
    throttles: tuple[ThrottleGroup, ...] = ()

    def planned(self) -> list[tuple[Decision, str]]:
        """Every decision with the token of the group that carries it out ('' for give-ups)."""
        out = [(d, g.token) for g in self.resubmits for d in g.decisions]
        out += [(d, g.token) for g in self.resizes for d in g.decisions]
        out += [(g.decision, g.token) for g in self.throttles]
        return out + [(d, "") for d in self.give_ups]


def plan_actions(decisions: Sequence[Decision], array_job_of: Callable[[str], str | None],
                 max_array_size: int, max_parallel: int | None,
                 new_token: Callable[[], str]) -> ActionPlan:
    by_resources: dict[Resources, list[Decision]] = {}
    by_array: dict[tuple[str, Resources], list[Decision]] = {}
    give_ups, throttles = [], []
    for d in decisions:
        if d.action == "resubmit" and d.resources is not None:
            by_resources.setdefault(d.resources, []).append(d)
        elif d.action == "resize_pending" and d.resources is not None:
            array = array_job_of(d.attempt_token)
            if array is not None:
                by_array.setdefault((array, d.resources), []).append(d)
        elif d.action == "throttle":
            throttles.append(ThrottleGroup(new_token(), str(d.params["array_job_id"]),
                                           int(d.params["throttle"]), d))  # type: ignore[call-overload]
        else:
            give_ups.append(d)
    resubmits = []
    for resources, group in by_resources.items():
        by_task = {d.task_index: d for d in group}
        for chunk in plan_chunks(sorted(by_task), max_array_size, max_parallel):
            resubmits.append(ResubmitGroup(new_token(), resources, chunk,
                                           tuple(by_task[t] for t in chunk.task_indices)))
    resizes = tuple(ResizeGroup(new_token(), array, resources, tuple(group))
                    for (array, resources), group in by_array.items())
    return ActionPlan(tuple(resubmits), resizes, tuple(give_ups), tuple(throttles))
