"""Parse `sacct --parsable2 --noheader` text into per-array-element observations.

Quirks handled (each has a fixture line in tests/fixtures/sacct):
- array elements print as `12_3`; a still-pending array is ONE line `12_[3-9%2]`;
- the last element's JobIDRaw is the array's own id (`3_9|3|…`), so JobID is what we key on;
- steps `.batch`, `.extern`, `.0` follow their allocation line; MaxRSS is only on steps;
- an OOM inside an srun step leaves the job FAILED 1:0 and only the step OUT_OF_MEMORY 0:125;
- `-D` prints earlier runs of a requeued job as REQUEUED lines before the current one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from campaignctl.core.slurm_states import SlurmState, State, classify_state
from campaignctl.core.units import parse_duration_seconds

SACCT_FIELDS = ("JobID", "JobIDRaw", "JobName", "Partition", "State", "ExitCode", "Elapsed",
                "Timelimit", "NodeList", "AllocTRES", "ReqMem", "MaxRSS", "Submit", "Start",
                "End", "Comment")  # Comment last: it is free text and may contain '|'
_JOB_ID = re.compile(
    r"^(?P<job>\d+)(?:_(?:(?P<idx>\d+)|\[(?P<range>[^\]]+)\]))?(?:\+(?P<het>\d+))?"
    r"(?:\.(?P<step>[A-Za-z0-9_+-]+))?$")
_NO_TIME = ("", "Unknown", "None")


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


def expand_index_range(text: str) -> tuple[int, ...]:
    """`3-9%2` → 3..9; `1,4-5` → 1,4,5; `0-10:2` → 0,2,…,10."""
    out: list[int] = []
    for part in text.split("%")[0].split(","):
        part = part.strip()
        if not part:
            continue
        bounds, _, step = part.partition(":")
        lo, _, hi = bounds.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1, int(step or 1)))
    return tuple(out)


def _exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    return (int(code) if code.isdigit() else None, int(sig) if sig.isdigit() else None)


def _time(text: str) -> str | None:
    return None if text in _NO_TIME else text


def parse_sacct_line(line: str) -> SacctRow | None:
    parts = line.rstrip("\n").split("|", len(SACCT_FIELDS) - 1)
    if len(parts) != len(SACCT_FIELDS):
        return None
    f = dict(zip(SACCT_FIELDS, parts, strict=True))
    match = _JOB_ID.match(f["JobID"])
    if not match:
        return None
    code, sig = _exit(f["ExitCode"])
    return SacctRow(
        job_id=f["JobID"], array_job_id=match["job"],
        array_index=int(match["idx"]) if match["idx"] else None,
        pending_indices=expand_index_range(match["range"]) if match["range"] else (),
        step=match["step"], name=f["JobName"], partition=f["Partition"],
        state=classify_state(f["State"]), exit_code=code, exit_signal=sig,
        elapsed_s=parse_duration_seconds(f["Elapsed"]),
        timelimit_s=parse_duration_seconds(f["Timelimit"]),
        nodes=f["NodeList"], alloc_tres=f["AllocTRES"], max_rss=f["MaxRSS"],
        submit=_time(f["Submit"]), start=_time(f["Start"]), end=_time(f["End"]), comment=f["Comment"],
    )


def parse_sacct(text: str) -> list[SacctRow]:
    return [row for line in text.splitlines() if line.strip()
            for row in [parse_sacct_line(line)] if row is not None]


def _from_allocation(row: SacctRow, index: int | None) -> JobObservation:
    nodes = "" if row.nodes == "None assigned" else row.nodes  # sacct's placeholder while pending
    return JobObservation(
        key=(row.array_job_id, index), state=row.state.state, slurm_state=row.state.raw,
        cancelled_by=row.state.cancelled_by, exit_code=row.exit_code, exit_signal=row.exit_signal,
        elapsed_s=row.elapsed_s, nodes=nodes, start=row.start, end=row.end, name=row.name)


def _with_step(obs: JobObservation, step: SacctRow) -> JobObservation:
    state = obs.state
    if step.state.state is State.OUT_OF_MEMORY and state in (State.FAILED, State.CANCELLED):
        state = State.OUT_OF_MEMORY  # srun step OOM: job line says FAILED 1:0
    rss = max((obs.max_rss, step.max_rss), key=_rss_bytes) if step.max_rss else obs.max_rss
    return replace(obs, state=state, max_rss=rss,
                   step_states=(*obs.step_states, f"{step.step}:{step.state.raw}"))


def _rss_bytes(text: str) -> float:
    match = re.match(r"^([\d.]+)([KMGT]?)", text)
    if not match:
        return 0.0
    return float(match[1]) * 1024 ** " KMGT".index(match[2] or " ")


def observe_jobs(rows: Iterable[SacctRow]) -> dict[tuple[str, int | None], JobObservation]:
    """Fold rows into one observation per (array job id, index); later runs (-D) win."""
    out: dict[tuple[str, int | None], JobObservation] = {}
    ran: set[tuple[str, int | None]] = set()  # keys seen on a job line: any later line is a rerun
    for row in rows:
        if row.pending_indices and row.step is None:
            for idx in row.pending_indices:
                out.setdefault((row.array_job_id, idx), _from_allocation(row, idx))
            continue
        key = (row.array_job_id, row.array_index)
        if row.step is None:
            # With --duplicates every earlier line of a JobID is an earlier run. Its state is
            # REQUEUED after `scontrol requeue`, but PREEMPTED or NODE_FAIL when Slurm requeued it.
            requeues = out[key].requeues + 1 if key in ran else 0
            ran.add(key)
            out[key] = replace(_from_allocation(row, row.array_index), requeues=requeues)
        elif key in out:
            out[key] = _with_step(out[key], row)
    return out
