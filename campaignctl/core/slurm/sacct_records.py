"""What sacct text is read into (core/slurm/sacct.py reads it): one line as a row, one array element
as an observation, and the site's reading of what its text means."""

from __future__ import annotations

from dataclasses import dataclass, field

from campaignctl.core.model.slurm_states import SlurmState, State


@dataclass(frozen=True, slots=True)
class SacctRow:
    job_id: str
    array_job_id: str
    array_index: int | None
    pending_indices: tuple[int, ...]
    step: str | None
    name: str
    partition: str
    state: SlurmState
    exit_code: int | None
    exit_signal: int | None
    elapsed_s: int | None
    timelimit_s: int | None
    nodes: str
    alloc_tres: str
    max_rss: str
    submit: str | None
    start: str | None
    end: str | None
    comment: str
    pending_cut: bool = False  # the pending index list was cut: `pending_indices` holds only what is certain
    consumed_energy_j: int | None = None  # ConsumedEnergyRaw; None where the site accounts no energy


@dataclass(frozen=True, slots=True)
class JobObservation:
    """What sacct says about one array element (or plain job) as a whole."""

    key: tuple[str, int | None]
    state: State
    slurm_state: str
    cancelled_by: str | None
    exit_code: int | None
    exit_signal: int | None
    elapsed_s: int | None
    nodes: str
    start: str | None
    end: str | None
    max_rss: str = ""
    name: str = ""
    requeues: int = 0
    step_states: tuple[str, ...] = field(default_factory=tuple)
    alloc_tres: str = ""  # e.g. billing=2,cpu=2,gres/gpu:a100=1,gres/gpu=1,mem=200M,node=1; "" while pending
    # The job line's ConsumedEnergyRaw: the whole allocation (the steps repeat it; reportseff
    # issue #66 shows 101630 on the job, .extern and .0 lines alike).
    consumed_energy_j: int | None = None


@dataclass(frozen=True, slots=True)
class Reading:
    """What this site's sacct text means where that depends on the site: its Slurm's version and
    who is not "someone else" when a step of a job is cancelled."""

    exit_codes_verbatim: bool = False  # Slurm 25.11+ (core/slurm/slurm_version.py)
    # uids whose `CANCELLED by <uid>` on a step of a FAILED job is the job failing, not a person
    # stopping it: root, SlurmUser and the job's own user. A real recording (toil's tests, job
    # 765096: job `FAILED 0:9`, `.0 CANCELLED by 54386 0:9`, 54386 the job's user) is a job killed
    # by SIGKILL, exit 137
    own_cancellers: frozenset[str] = frozenset({"0"})


DEFAULT_READING = Reading()
