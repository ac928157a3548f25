"""Decisions → action groups. Retries of one tick that share resources go out together as one
new array (chunked by MaxArraySize); in-place resizes of one array are one `scontrol update`
of exactly the decided pending elements; a throttle change is one `scontrol update` of an
array's ArrayTaskThrottle; a budget hold is one `scontrol hold` per array; a cancel (to move an
attempt to other resources) or a stop (early stopping) is one `scancel --state=…` of one element. Decisions that need no
Slurm call (give up, alert, resize_next: a note for the task's next attempt) are only recorded.
Pure."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from campaignctl.core.decisions.action_records import (
    Ask,
    Cancel,
    Hold,
    Promote,
    Release,
    ResizePending,
    Resubmit,
    Retry,
    Start,
    Stop,
    Throttle,
    changes_of,
)
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing.pack_fates import requested_share
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.plan import ArrayChunk, plan_chunks
from campaignctl.core.spec.spec import Resources


@dataclass(frozen=True, slots=True)
class ResubmitGroup:
    token: str
    resources: Resources
    chunk: ArrayChunk
    decisions: tuple[Decision, ...]  # in array-index order
    after: str = ""  # a job element it waits for (a search's trial asked ahead): --dependency=afterany
    cluster: str = ""  # where it goes: a start's placement, a retry's last attempt's cluster ('' : SLURM_CONF's)


# Resources field → `scontrol update` field for a pending job (scontrol(1), "update" of a job):
# MinMemoryNode in MB, TimeLimit in minutes. CPUs need NumCPUs AND CPUsPerTask: NumCPUs alone
# allocates 2 CPUs but leaves SLURM_CPUS_PER_TASK=1, CPUsPerTask alone still allocates 1 (lab cluster).
# ExcNodeList replaces the job's whole --exclude list (the decision carries what the job keeps out
# now); a blank value clears it (scontrol(1): "Value may be cleared with blank data value").
_SCONTROL_FIELDS = {"mem_mb": ("MinMemoryNode",), "time_min": ("TimeLimit",),
                    "cpus_per_task": ("NumCPUs", "CPUsPerTask"), "exclude": ("ExcNodeList",)}


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
        """Only what the decisions change: a plain user may not touch TimeLimit upwards, so a
        CPU resize must not send it along."""
        changed = {k for d in self.decisions for k in changes_of(d.typed)}
        return [f"{field}={'' if (value := getattr(self.resources, key)) is None else value}"
                for key, fields in _SCONTROL_FIELDS.items() if key in changed for field in fields]


@dataclass(frozen=True, slots=True)
class ThrottleGroup:
    token: str
    array_job_id: str
    throttle: int
    decision: Decision


@dataclass(frozen=True, slots=True)
class SingleGroup:
    """One decision carried out on its own: a budget hold or release (`arrays` in its params), or a
    cancel or stop of one element."""

    token: str
    decision: Decision


@dataclass(frozen=True, slots=True)
class ActionPlan:
    resubmits: tuple[ResubmitGroup, ...]
    resizes: tuple[ResizeGroup, ...]
    recorded: tuple[Decision, ...]  # effect RECORD (core/decisions/action_records.py): no Slurm call
    throttles: tuple[ThrottleGroup, ...] = ()
    holds: tuple[SingleGroup, ...] = ()
    cancels: tuple[SingleGroup, ...] = ()

    def planned(self) -> list[tuple[Decision, str]]:
        """Every decision with the token of the group that carries it out ('' if recorded only; a
        start's size_first and pack records: the start's submission, which they describe)."""
        out = [(d, g.token) for g in self.resubmits for d in g.decisions]
        out += [(d, g.token) for g in self.resizes for d in g.decisions]
        out += [(g.decision, g.token) for g in self.throttles]
        out += [(g.decision, g.token) for g in (*self.holds, *self.cancels)]
        starts = {d.attempt_token: g.token for g in self.resubmits for d in g.decisions if d.action == "start"}
        return out + [(d, starts.get(d.attempt_token, "")) for d in self.recorded]


def plan_actions(decisions: Sequence[Decision], array_job_of: Callable[[str], str | None],
                 max_array_size: int, max_parallel: int | None,
                 new_token: Callable[[], str]) -> ActionPlan:
    by_resources: dict[tuple[Resources, str, str], list[Decision]] = {}
    by_array: dict[tuple[str, Resources], list[Decision]] = {}
    recorded, throttles, holds, cancels = [], [], [], []
    resubmits = []
    for d in decisions:  # by what its params say it is (core/decisions/action_records.py)
        match d.typed:
            case Start(tasks=tasks, throttle=throttle) as p if d.resources is not None and tasks:
                shape = PackShape(p.per_element, p.per_gpu, p.cpus, p.processes or 0) if p.per_element > 1 else None
                resubmits.append(ResubmitGroup(new_token(), d.resources, ArrayChunk(tasks, throttle, shape), (d,),
                                               cluster=p.cluster))
            case Ask(after=after) if d.resources is not None:
                by_resources.setdefault((d.resources, after, _cluster_of(d, array_job_of)), []).append(d)
            case Resubmit(cluster=str() as cluster) if d.resources is not None:
                by_resources.setdefault((d.resources, "", cluster or _cluster_of(d, array_job_of)), []).append(d)
            case Promote() | Retry() if d.resources is not None:
                by_resources.setdefault((d.resources, "", _cluster_of(d, array_job_of)), []).append(d)
            case ResizePending() if d.resources is not None and (array := array_job_of(d.attempt_token)):
                by_array.setdefault((array, d.resources), []).append(d)
            case Throttle(array_job_id=array, throttle=int() as limit):
                throttles.append(ThrottleGroup(new_token(), array, limit, d))
            case Hold() | Release():
                holds.append(SingleGroup(new_token(), d))
            case Cancel() | Stop():
                cancels.append(SingleGroup(new_token(), d))
            case _:
                recorded.append(d)
    for (resources, after, cluster), group in by_resources.items():
        by_task = {d.task_index: d for d in group}
        for chunk in plan_chunks(sorted(by_task), max_array_size, max_parallel):
            resubmits.append(ResubmitGroup(new_token(), resources, chunk,
                                           tuple(by_task[t] for t in chunk.task_indices), after, cluster))
    resizes = tuple(ResizeGroup(new_token(), array, resources, tuple(group))
                    for (array, resources), group in by_array.items())
    return ActionPlan(tuple(resubmits), resizes, tuple(recorded), tuple(throttles), tuple(holds), tuple(cancels))


def _cluster_of(d: Decision, array_job_of: Callable[[str], str | None]) -> str:
    """A retry goes to the cluster its task's last attempt ran on (its job id's; core/slurm/job_ref.py)."""
    return job_ref.cluster_of(array_job_of(d.attempt_token) or "")


# --- what a submission of decisions carries (services/act.py writes its intent from these) ---

@dataclass(frozen=True, slots=True)
class SubmissionIntent:
    """A submission as written before its sbatch runs: the exactly-once protocol's intent row
    and one attempt row per task."""

    token: str
    revision: int
    chunk: ArrayChunk
    folder: str
    resources: Resources
    requeue: bool
    kind: str = "retry"  # initial | retry | promotion | trial
    task_params: Mapping[int, str] = field(default_factory=dict)  # params JSON by task, where a rule changed them
    adopted: frozenset[int] = frozenset()  # tasks whose params are these from now on: a search's asked trials
    cluster: str = ""  # the cluster it goes to ('' : SLURM_CONF's; core/slurm/job_ref.py)

    @property
    def resources_json(self) -> str:
        return json.dumps(asdict(self.resources))

    def shares(self) -> list[str]:
        """By element, a packed task's share of what its element asks for ([] unpacked)."""
        chunk = self.chunk
        if chunk.pack is None:
            return []
        per = chunk.pack.per_element
        return [requested_share(self.resources, chunk.pack, min(per, chunk.size - e * per))
                for e in range(chunk.elements)]


def intent_of(group: ResubmitGroup, revision: int, folder: str, requeue: bool,
              own: Callable[[int], Mapping[str, object]]) -> SubmissionIntent:
    """The intent of a group of decisions submitted together (`own`: a task's spec parameters)."""
    return SubmissionIntent(group.token, revision, group.chunk, folder, group.resources, requeue,
                            submission_kind(group.decisions), task_params_of(group.decisions, own),
                            frozenset(d.task_index for d in group.decisions if adopts(d)), group.cluster)


def submission_kind(decisions: Sequence[Decision]) -> str:
    """The submission's kind: a campaign's first attempts', a promotion's, a search's new trials', or a retry's."""
    actions = {d.action for d in decisions}
    return {"start": "initial", "promote": "promotion", "ask": "trial"}.get(actions.pop(), "retry") \
        if len(actions) == 1 else "retry"


def task_params_of(decisions: Sequence[Decision], own: Callable[[int], Mapping[str, object]]) -> dict[int, str]:
    """Parameters a rule chose for the next attempt (decide's `task_params`, a search's asked
    values over the fixed ones), by task index: stored on the attempt rows with the intent, so a
    crash-repaired submission renders the same argv (and every retry keeps them)."""
    out = {}
    for d in decisions:
        p = d.typed
        if isinstance(p, Resubmit) and p.task_params is not None:
            out[d.task_index] = json.dumps(p.task_params, sort_keys=True)
        elif isinstance(p, (Ask, Promote)) and p.params:  # adopts: a search's trial, asked or promoted
            out[d.task_index] = json.dumps({**own(d.task_index), **p.params}, sort_keys=True)
    return out


def adopts(d: Decision) -> bool:
    """A search's trial, asked or promoted: its task's params are the sampled ones from now on."""
    return isinstance(p := d.typed, (Ask, Promote)) and bool(p.params)


def tasks_of(d: Decision) -> tuple[int, ...]:
    """The tasks a decision submits: a start's chunk, or its own task."""
    return p.tasks if isinstance(p := d.typed, Start) else (d.task_index,)


def next_attempt(d: Decision) -> int:
    """The number of the attempt a resubmit starts (a start its task, a promotion its config's
    next rung, an ask its trial: 1)."""
    attempt = d.inputs.get("attempt")
    return 1 if d.action in ("start", "promote", "ask") or not isinstance(attempt, int) else attempt + 1
