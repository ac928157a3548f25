"""What the store returns: plain frozen records, independent of the database library."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from campaignctl.core.model.params import Scalar


@dataclass(frozen=True, slots=True)
class CampaignRecord:
    id: int
    name: str
    state: str
    current_revision: int
    run_dir: str
    owner: str
    created_at: str


@dataclass(frozen=True, slots=True)
class RevisionRecord:
    campaign_id: int
    number: int
    spec_text: str
    spec_hash: str
    spec_path: str
    created_at: str
    policy_json: str = "{}"
    settings_json: str = "{}"  # what a tick needs without re-reading the spec: tasks, max_parallel
    author: str = ""
    reason: str = ""
    kind: str = "spec"  # spec (initial or a changed spec at submit) | policy | promote | rollback
    shadow_policy_json: str = ""  # a candidate policy proposing next to the enforced one ('' if none)
    source_revision: int | None = None  # rollback: the revision whose content this one restores


@dataclass(frozen=True, slots=True)
class SubmissionRecord:
    id: int
    campaign_id: int
    revision: int
    token: str
    state: str  # intent → submitted (held, id known) → released; or abandoned
    job_id: str | None
    array_spec: str
    size: int
    folder: str
    created_at: str
    resources_json: str = "{}"
    kind: str = "initial"
    requeue: int = 0
    tries: int = 0  # tries Slurm refused (sbatch refused or unreadable, release failed)
    last_error: str = ""  # Slurm's message of the last refused try
    next_try_at: str | None = None  # UTC: a refused submission is not tried again before
    submitted_by: str = ""  # the Unix user who runs its sbatch (members of a shared campaign: themselves)
    pack: str = ""  # a packed submission's PackShape as JSON (core/pack_plan.py); '' unpacked
    cluster: str = ""  # where it was submitted ('' : the cluster SLURM_CONF names); its job id is qualified by it


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    task_index: int
    params: Mapping[str, Scalar]
    attempt_number: int
    array_index: int
    token: str
    job_id: str | None  # "<array job id>_<index>" once sbatch answered
    state: str
    submission_state: str
    created_at: str

    @property
    def array_job_id(self) -> str | None:
        return self.job_id.split("_")[0] if self.job_id else None


class AttemptFacts(NamedTuple):
    """What Slurm last said of one attempt: sacct's fields, or that it is missing from sacct and
    squeue. Rules read them (core/tick/decide.py), a tick writes them back when they change
    (`ObservedChange`) and keeps them for replay (`observations`). A NamedTuple, not a frozen
    dataclass: a worst-case tick builds two per attempt, 200,000 at 100,000 tasks, and a frozen
    dataclass's __init__ made `diff_observations` 1.7× slower (0.64 s against 0.38 s CPU)."""

    state: str  # domain state (core/model/slurm_states.py), or SUBMITTED / UNKNOWN before or without sacct
    slurm_state: str = ""  # sacct State as printed, e.g. `CANCELLED by 0`
    exit_code: int | None = None
    nodes: str = ""
    elapsed_s: int | None = None
    max_rss: str = ""
    ended_at: str | None = None  # sacct End (core/base/clock.py: stored UTC; old rows local)
    missing_since: str | None = None  # first tick it was in neither sacct nor squeue (same form)


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One attempt as reconcile remembers it: last observed Slurm facts and effective resources."""

    id: int
    task_index: int
    attempt_number: int
    array_index: int
    token: str
    job_id: str | None
    state: str  # the fields of AttemptFacts, flat: the store's row, read 100,000 at a time (`facts`)
    slurm_state: str
    exit_code: int | None
    nodes: str
    elapsed_s: int | None
    max_rss: str
    ended_at: str | None
    missing_since: str | None
    resources_json: str  # the attempt's own after an in-place resize, else its submission's
    submission_token: str
    submission_state: str
    created_at: str
    params_json: str = "{}"  # the task parameters it ran with: its own after a rule changed them, else the task's
    params_changed: bool = False
    cause: str | None = None  # named from the program's output (exit.json) once it FAILED
    evidence: str = ""
    packed: bool = False  # it shares its array element with other tasks (core/pack_plan.py)

    @property
    def facts(self) -> AttemptFacts:
        return AttemptFacts(self.state, self.slurm_state, self.exit_code, self.nodes, self.elapsed_s, self.max_rss,
                            self.ended_at, self.missing_since)


@dataclass(frozen=True, slots=True)
class ObservedChange:
    """What reconcile writes back for an attempt whose observed facts changed this tick."""

    attempt_id: int
    facts: AttemptFacts
    for_history: bool  # a fact a rule reads changed: kept in `observations` for replay
    alloc_tres: str = ""  # sacct AllocTRES once the job has started (it only appears with a state change)
    consumed_energy_j: int | None = None  # sacct ConsumedEnergyRaw where the site accounts energy
