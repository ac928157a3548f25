"""Parse `sacct --parsable2 --noheader` text into per-array-element observations.

Quirks handled (each has a fixture line in tests/fixtures/sacct):
- array elements print as `12_3`; a still-pending array is ONE line `12_[3-9%2]`;
- the last element's JobIDRaw is the array's own id (`3_9|3|…`), so JobID is what we key on;
- steps `.batch`, `.extern`, `.0` follow their allocation line; MaxRSS is only on steps;
- an OOM inside an srun step leaves the job FAILED 1:0 and only the step OUT_OF_MEMORY 0:125;
- `-D` prints earlier runs of a requeued job as REQUEUED lines before the current one.
"""

from __future__ import annotations

import io
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

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
    alloc_tres: str = ""  # e.g. billing=2,cpu=2,gres/gpu:a100=1,gres/gpu=1,mem=200M,node=1; "" while pending


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


@lru_cache(maxsize=1024)
def _exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    return (int(code) if code.isdigit() else None, int(sig) if sig.isdigit() else None)


_state = lru_cache(maxsize=1024)(classify_state)  # a handful of distinct strings per text
_duration = lru_cache(maxsize=8192)(parse_duration_seconds)
_I = {name: i for i, name in enumerate(SACCT_FIELDS)}
_ID, _NAME, _PART, _STATE, _EXIT, _ELAPSED, _LIMIT, _NODES, _TRES, _RSS, _SUBMIT, _START, _END, _COMMENT = (
    _I[f] for f in ("JobID", "JobName", "Partition", "State", "ExitCode", "Elapsed", "Timelimit",
                    "NodeList", "AllocTRES", "MaxRSS", "Submit", "Start", "End", "Comment"))


def _time(text: str) -> str | None:
    return None if text in _NO_TIME else text


def _split_job_id(text: str) -> tuple[str, int | None, tuple[int, ...], str | None] | None:
    """`12_3.batch` → ('12', 3, (), 'batch'); plain forms by string ops, the rest by the regex."""
    base, dot, step = text.partition(".")
    job, _, idx = base.partition("_")
    if job.isdigit() and (not idx or idx.isdigit()) and (not dot or step):
        return job, int(idx) if idx else None, (), step or None
    match = _JOB_ID.match(text)
    if not match:
        return None
    pending = expand_index_range(match["range"]) if match["range"] else ()
    return match["job"], int(match["idx"]) if match["idx"] else None, pending, match["step"]


def parse_sacct_line(line: str) -> SacctRow | None:
    p = line.rstrip("\n").split("|", len(SACCT_FIELDS) - 1)
    if len(p) != len(SACCT_FIELDS):
        return None
    ids = _split_job_id(p[_ID])
    if ids is None:
        return None
    job, index, pending, step = ids
    code, sig = _exit(p[_EXIT])
    # steps: durations are not used (the allocation line has them); skipping them halves the cost
    elapsed = _duration(p[_ELAPSED]) if step is None else None
    limit = _duration(p[_LIMIT]) if step is None else None
    return SacctRow(p[_ID], job, index, pending, step, p[_NAME], p[_PART], _state(p[_STATE]), code, sig,
                    elapsed, limit, p[_NODES], p[_TRES], p[_RSS], _time(p[_SUBMIT]), _time(p[_START]),
                    _time(p[_END]), p[_COMMENT])


def parse_sacct(text: str) -> Iterator[SacctRow]:
    """Rows of `text`, lazily: a 100,000-element campaign is 400,000 lines."""
    for line in io.StringIO(text):
        if line.strip():
            row = parse_sacct_line(line)
            if row is not None:
                yield row


def _rss_bytes(text: str) -> float:
    """`123456K` → bytes; sacct prints K/M/G/T suffixes (or none)."""
    if not text:
        return 0.0
    unit = " KMGT".find(text[-1])
    try:
        return float(text[:-1]) * 1024 ** unit if unit > 0 else float(text)
    except ValueError:
        return 0.0


class _Fold:
    """One array element while its lines are read: its current run's facts and its steps."""

    __slots__ = ("args", "oom", "requeues", "rss", "rss_bytes", "steps")

    def __init__(self, row: SacctRow, requeues: int) -> None:
        nodes = "" if row.nodes == "None assigned" else row.nodes  # sacct's placeholder while pending
        st = row.state
        self.args = (st.state, st.raw, st.cancelled_by, row.exit_code, row.exit_signal, row.elapsed_s,
                     nodes, row.start, row.end, row.name, row.alloc_tres)
        self.requeues = requeues
        self.oom, self.rss, self.rss_bytes = False, "", 0.0
        self.steps: list[str] = []

    def add_step(self, step: str, state: SlurmState, max_rss: str) -> None:
        if state.state is State.OUT_OF_MEMORY:
            self.oom = True
        if max_rss:
            size = _rss_bytes(max_rss)
            if size > self.rss_bytes:
                self.rss, self.rss_bytes = max_rss, size
        self.steps.append(f"{step}:{state.raw}")

    def observation(self, key: tuple[str, int | None]) -> JobObservation:
        state, raw, by, code, sig, elapsed, nodes, start, end, name, tres = self.args
        if self.oom and state in (State.FAILED, State.CANCELLED):
            state = State.OUT_OF_MEMORY  # srun step OOM: the job line says FAILED 1:0
        return JobObservation(key, state, raw, by, code, sig, elapsed, nodes, start, end, self.rss,
                              name, self.requeues, tuple(self.steps), tres)


Key = tuple[str, int | None]  # (array job id, array index); index None for a plain job


def observe_jobs(text: str | Iterable[str], wanted: Collection[Key] | None = None) -> dict[Key, JobObservation]:
    """Fold sacct text into one observation per (array job id, index). With --duplicates every
    earlier line of a JobID is an earlier run: REQUEUED after `scontrol requeue`, but PREEMPTED
    or NODE_FAIL when Slurm requeued it; the last run wins and the earlier ones count as requeues.
    Step lines (3 of every 4) are read on a short path: only State and MaxRSS matter there, and
    so are the lines of elements not in `wanted` (when given): `--jobs` names whole arrays, whose
    finished elements a tick no longer needs."""
    folds: dict[tuple[str, int | None], _Fold] = {}
    for line in io.StringIO(text) if isinstance(text, str) else text:
        job_id = line[:line.find("|")]
        base, dot, step = job_id.partition(".")
        if dot and step:
            job, _, idx = base.partition("_")
            if job.isdigit() and (not idx or idx.isdigit()):
                fold = folds.get((job, int(idx) if idx else None))
            else:  # het job (`5+1.batch`) and other rare forms: the full grammar
                ids = _split_job_id(job_id)
                fold = folds.get((ids[0], ids[1])) if ids else None
            parts = line.split("|", _RSS + 1)
            if fold is not None and len(parts) > _RSS + 1:
                fold.add_step(step, _state(parts[_STATE]), parts[_RSS])
            continue
        if wanted is not None and not dot:
            job, _, idx = base.partition("_")
            if idx.isdigit() and (job, int(idx)) not in wanted:
                continue
        row = parse_sacct_line(line) if line.strip() else None
        if row is None or row.step is not None:
            continue
        if row.pending_indices:
            for element in row.pending_indices:
                if (row.array_job_id, element) not in folds:
                    folds[(row.array_job_id, element)] = _Fold(row, 0)
            continue
        key = (row.array_job_id, row.array_index)
        earlier = folds.get(key)
        folds[key] = _Fold(row, earlier.requeues + 1 if earlier is not None else 0)
    return {key: fold.observation(key) for key, fold in folds.items()}
