"""What the rules decide from and what they decide: an attempt and a task as a tick sees them, and
a Decision (rule, action, reason, the inputs it saw, and its params: the action's record from
core/decisions/action_records.py, made a JSON object only where the log writes it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.decisions.action_records import ActionRecord, raw_of
from campaignctl.core.model.params import Scalar
from campaignctl.core.spec.spec import Resources


@dataclass(frozen=True, slots=True)
class AttemptView:
    token: str
    number: int
    state: str  # domain state as last seen (State value, SUBMITTING, UNKNOWN, LOST)
    job_id: str | None
    resources: Resources
    exit_code: int | None = None
    slurm_state: str = ""
    nodes: str = ""
    elapsed_s: int | None = None
    max_rss: str = ""
    ended_at: str | None = None  # sacct End (core/base/clock.py: stored UTC; old rows local)
    missing_since: str | None = None  # first tick it was in neither sacct nor squeue (same form)
    decided: bool = False  # a resubmit/give-up decision already answers this attempt
    cause: str | None = None  # named from the program's output at exit (exit.json), e.g. gpu_out_of_memory
    evidence: str = ""  # the output line(s) that named it
    params: Mapping[str, Scalar] = field(default_factory=dict)  # the task parameters this attempt ran with
    params_changed: bool = False  # a rule changed them from the spec's: later attempts keep them
    packed: bool = False  # it shares its array element with other tasks: no element-wide change is its own

    @property
    def array_job_id(self) -> str | None:
        return self.job_id.split("_")[0] if self.job_id else None


@dataclass(frozen=True, slots=True)
class Replacement:
    """campaignctl cancelled this attempt on purpose, to run it again with other resources."""

    rule: str  # gpu_fallback | gpu_idle
    resources: Resources
    reason: str
    only_if: str = ""  # PENDING: the cancel was meant for an element that had not started
    task_params: Mapping[str, Scalar] | None = None  # the retry's parameters (a rollback); None: the attempt's
    cluster: str = ""  # a move's target cluster ('' : where the attempt ran)

    def applies_to(self, attempt: AttemptView) -> bool:
        """CANCELLED by our request, not by someone after it started despite a PENDING-only cancel."""
        return attempt.state == "CANCELLED" and not (self.only_if == "PENDING" and split_nodes(attempt.nodes))


@dataclass(frozen=True, slots=True)
class TaskView:
    index: int
    attempts: tuple[AttemptView, ...]  # oldest first
    adjust: Mapping[str, object] = field(default_factory=dict)  # next attempt's cpus_per_task/gpus (utilisation)
    replacements: Mapping[str, Replacement] = field(default_factory=dict)  # by attempt token

    @property
    def latest(self) -> AttemptView:
        return self.attempts[-1]


@dataclass(frozen=True, slots=True)
class Decision:
    task_index: int
    attempt_token: str
    rule: str
    action: str  # resubmit | give_up | resize_pending
    reason: str
    inputs: Mapping[str, object]
    typed: ActionRecord  # the action's params record
    resources: Resources | None = None  # resubmit: the next attempt's; resize_pending: the new ones
    mode: str = "enforce"  # shadow: logged as proposed, never carried out
    gate: str = ""  # why it waits for `campaignctl approve` ('' when it needs no approval)
    # its place among the decisions the actor was given (services/act.py): how a group of the plan
    # finds the log row written for each of its decisions; not part of what was decided
    ref: int = field(default=-1, compare=False)

    @property
    def params(self) -> dict[str, object]:
        """The params as the log writes them (action_records.raw_of)."""
        return raw_of(self.typed)
