"""Slurm job states → campaignctl's domain states, through one explicit table.

sacct prints the base state plus decorations: `CANCELLED by 1234` (uid of the canceller), a
trailing `+` when a non-parsable column was truncated. Anything not in the table is UNKNOWN and
is never acted on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class State(str, enum.Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    BOOT_FAIL = "BOOT_FAIL"
    PREEMPTED = "PREEMPTED"
    CANCELLED = "CANCELLED"
    REQUEUED = "REQUEUED"
    SUSPENDED = "SUSPENDED"
    DEADLINE = "DEADLINE"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class StateInfo:
    state: State
    terminal: bool
    meaning: str


_TABLE: dict[str, StateInfo] = {
    "PENDING": StateInfo(State.PENDING, False, "queued; resources may still be changed in place"),
    "REQUEUE_HOLD": StateInfo(State.PENDING, False, "requeued and held; waits for release"),
    "REQUEUE_FED": StateInfo(State.PENDING, False, "requeued by a federation"),
    # new in Slurm 25.11 (issue 13 names it; the 22.05 man pages here do not know it): a job
    # requeued to start again ahead of others; it waits, so it is pending
    "EXPEDITING": StateInfo(State.PENDING, False, "requeued to run again first (Slurm 25.11)"),
    "RESV_DEL_HOLD": StateInfo(State.PENDING, False, "held because its reservation was deleted"),
    "CONFIGURING": StateInfo(State.RUNNING, False, "nodes allocated, booting"),
    "RUNNING": StateInfo(State.RUNNING, False, "running"),
    "COMPLETING": StateInfo(State.RUNNING, False, "ending; processes still being cleaned up"),
    "STAGE_OUT": StateInfo(State.RUNNING, False, "staging out burst-buffer data"),
    "SIGNALING": StateInfo(State.RUNNING, False, "being signalled"),
    # `scontrol update JobId=38 NumNodes=1` on a running job: sacct -D keeps a RESIZING record, then
    # the resized run (tests/fixtures/sacct/resizing.txt); the record is no requeue
    "RESIZING": StateInfo(State.RUNNING, False, "changing size"),
    "SUSPENDED": StateInfo(State.SUSPENDED, False, "suspended by the scheduler; will resume"),
    "STOPPED": StateInfo(State.SUSPENDED, False, "stopped (SIGSTOP); still holds its allocation"),
    "COMPLETED": StateInfo(State.COMPLETED, True, "every process exited 0"),
    "FAILED": StateInfo(State.FAILED, True, "non-zero exit code: the program's own failure"),
    "TIMEOUT": StateInfo(State.TIMEOUT, True, "killed at its time limit"),
    "OUT_OF_MEMORY": StateInfo(State.OUT_OF_MEMORY, True, "killed by the cgroup memory limit"),
    "NODE_FAIL": StateInfo(State.NODE_FAIL, True, "its node failed or was set DOWN"),
    "BOOT_FAIL": StateInfo(State.BOOT_FAIL, True, "its node failed to boot"),
    "PREEMPTED": StateInfo(State.PREEMPTED, True, "preempted by higher-priority work"),
    "CANCELLED": StateInfo(State.CANCELLED, True, "cancelled (by the uid after 'by')"),
    "DEADLINE": StateInfo(State.DEADLINE, True, "missed its --deadline"),
    # sacct(1): "RV REVOKED: Sibling was removed from cluster due to other cluster starting the
    # job". This cluster's copy of a federated job says nothing about the run, which is elsewhere
    # (`sacct --federation` shows it); never cancelled, never acted on
    "REVOKED": StateInfo(State.UNKNOWN, False, "a federation sibling's copy: the job runs on another cluster"),
    "SPECIAL_EXIT": StateInfo(State.FAILED, True, "special exit (requeue-hold on exit code)"),
    "REQUEUED": StateInfo(State.REQUEUED, True, "an earlier run of a requeued job (sacct -D)"),
}
_UNKNOWN = StateInfo(State.UNKNOWN, False, "not understood; never acted on")
TERMINAL = frozenset(info.state.value for info in _TABLE.values() if info.terminal)  # domain states that end a run


@dataclass(frozen=True, slots=True)
class SlurmState:
    info: StateInfo
    raw: str
    cancelled_by: str | None = None

    @property
    def state(self) -> State:
        return self.info.state


def classify_state(raw: str) -> SlurmState:
    """`CANCELLED by 0` → (CANCELLED, by '0'); `RUNNING+` → RUNNING; `WEIRD` → UNKNOWN."""
    text = raw.strip().rstrip("+")
    base, _, by = text.partition(" by ")
    info = _TABLE.get(base.strip(), _UNKNOWN)
    return SlurmState(info=info, raw=raw, cancelled_by=by.strip() or None)
