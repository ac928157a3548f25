"""Parse `sacct --parsable2 --noheader` text into per-array-element observations.

Quirks handled (each has a fixture line in tests/fixtures/sacct):
- array elements print as `12_3`; a still-pending array is ONE line `12_[3-9%2]`;
- the last element's JobIDRaw is the array's own id (`3_9|3|…`), so JobID is what we key on;
- steps `.batch`, `.extern`, `.0` follow their allocation line; MaxRSS is only on steps;
- an OOM inside an srun step leaves the job FAILED 1:0 and only the step OUT_OF_MEMORY 0:125;
- `-D` prints earlier runs of a requeued job as REQUEUED lines before the current one;
- a pending list longer than SLURM_BITSTR_LEN (64 bytes by default) is cut: `1_[0-4,…,51-...%1]`;
- ExitCode prints an exit status of 128+N as N (sacct does `if (tmp_int >= 128) tmp_int -= 128`):
  only DerivedExitCode, the job's highest step exit, still says 143:0 or 0:15. Slurm 25.11 prints
  the status as it is (`Reading.exit_codes_verbatim`);
- a step `CANCELLED by <uid>` inside a FAILED job is a person's cancel only when the uid is not the
  job's own user, root or SlurmUser (`Reading.own_cancellers`): Slurm itself kills steps that way;
- heterogeneous components `36+0`, `36+1` are one run; a RESIZING record precedes the resized run.

A line that cannot be read is skipped and counted (`Observed.skipped`), never fatal.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import replace
from functools import lru_cache

from campaignctl.core.base.clock import from_slurm
from campaignctl.core.base.units import parse_duration_seconds
from campaignctl.core.model.sacct_values import certain_indices, exit_pair, rss_bytes, shell_exit
from campaignctl.core.model.slurm_states import TERMINAL, SlurmState, State, classify_state
from campaignctl.core.slurm.sacct_records import DEFAULT_READING, JobObservation, Reading, SacctRow
from campaignctl.core.usage.energy import consumed_energy_j

SACCT_FIELDS = ("JobID", "JobIDRaw", "JobName", "Partition", "State", "ExitCode", "DerivedExitCode", "Elapsed",
                "Timelimit", "NodeList", "AllocTRES", "ReqMem", "MaxRSS", "Submit", "Start",
                "End", "ConsumedEnergyRaw", "Comment")  # Comment last: it is free text and may contain '|'
_JOB_ID = re.compile(
    r"^(?P<job>\d+)(?:_(?:(?P<idx>\d+)|\[(?P<range>[^\]]+)\]))?(?:\+(?P<het>\d+))?"
    r"(?:\.(?P<step>[A-Za-z0-9_+-]+))?$")
_NO_TIME = ("", "Unknown", "None")


_state = lru_cache(maxsize=1024)(classify_state)  # a handful of distinct strings per text


@lru_cache(maxsize=1024)
def _step_mark(raw: str) -> tuple[bool, str | None]:
    """What a step's State tells about its job: killed by the OOM killer; cancelled by a uid."""
    state = classify_state(raw)
    return state.state is State.OUT_OF_MEMORY, state.cancelled_by


_duration = lru_cache(maxsize=8192)(parse_duration_seconds)
_I = {name: i for i, name in enumerate(SACCT_FIELDS)}
_ID, _NAME, _PART, _STATE, _EXIT, _DERIVED, _ELAPSED, _LIMIT, _NODES, _TRES, _RSS, _SUBMIT, _START, _END, _ENERGY, \
    _COMMENT = (_I[f] for f in ("JobID", "JobName", "Partition", "State", "ExitCode", "DerivedExitCode", "Elapsed",
                                "Timelimit", "NodeList", "AllocTRES", "MaxRSS", "Submit", "Start", "End",
                                "ConsumedEnergyRaw", "Comment"))


def _time(text: str) -> str | None:
    """Submit/Start/End: sacct runs under TZ=UTC (adapters/proc.py FORCED)."""
    return None if text in _NO_TIME else from_slurm(text)


def _split_job_id(text: str) -> tuple[str, int | None, tuple[int, ...], str | None, bool] | None:
    """`12_3.batch` → ('12', 3, (), 'batch', False); plain forms by string ops, the rest by the
    regex. The last item says the pending list was cut (`certain_indices`)."""
    base, dot, step = text.partition(".")
    job, _, idx = base.partition("_")
    if job.isdigit() and (not idx or idx.isdigit()) and (not dot or step):
        return job, int(idx) if idx else None, (), step or None, False
    match = _JOB_ID.match(text)
    if not match:
        return None
    pending, cut = certain_indices(match["range"]) if match["range"] else ((), False)
    return match["job"], int(match["idx"]) if match["idx"] else None, pending, match["step"], cut


class UnreadableLine(ValueError):
    """A line sacct printed that this parser cannot read; its message says why."""


def read_sacct_line(line: str, reading: Reading = DEFAULT_READING) -> SacctRow:
    """One line → SacctRow, or UnreadableLine saying why not."""
    p = line.rstrip("\n").split("|", len(SACCT_FIELDS) - 1)
    if len(p) != len(SACCT_FIELDS):
        raise UnreadableLine(f"{len(p)} fields, expected {len(SACCT_FIELDS)}")
    if "\ufffd" in line:  # bytes that were not UTF-8, replaced while decoding
        raise UnreadableLine("non-UTF-8 bytes")
    try:
        ids = _split_job_id(p[_ID])
    except ValueError:
        ids = None
    if ids is None:
        raise UnreadableLine(f"unreadable JobID {p[_ID]!r}")
    job, index, pending, step, cut = ids
    code, sig = shell_exit(p[_EXIT], p[_DERIVED], reading.exit_codes_verbatim) if step is None else exit_pair(p[_EXIT])
    try:  # steps: durations are not used (the allocation line has them); skipping them halves the cost
        elapsed = _duration(p[_ELAPSED]) if step is None else None
        limit = _duration(p[_LIMIT]) if step is None else None
    except ValueError:
        raise UnreadableLine(f"unreadable Elapsed {p[_ELAPSED]!r} or Timelimit {p[_LIMIT]!r}") from None
    return SacctRow(p[_ID], job, index, pending, step, p[_NAME], p[_PART], _state(p[_STATE]), code, sig,
                    elapsed, limit, p[_NODES], p[_TRES], p[_RSS], _time(p[_SUBMIT]), _time(p[_START]),
                    _time(p[_END]), p[_COMMENT], cut, consumed_energy_j(p[_ENERGY]))


def parse_sacct_line(line: str) -> SacctRow | None:
    try:
        return read_sacct_line(line)
    except UnreadableLine:
        return None


def parse_sacct(text: str) -> Iterator[SacctRow]:
    """Rows of `text`, lazily: a 100,000-element campaign is 400,000 lines."""
    for line in io.StringIO(text):
        if line.strip():
            row = parse_sacct_line(line)
            if row is not None:
                yield row


_LIVE = frozenset({State.PENDING, State.RUNNING, State.SUSPENDED})
_ENDED = frozenset(s for s in State if s.value in TERMINAL)  # members, not values: `.value` is a slow descriptor


def _rank(state: State) -> int:
    """Which heterogeneous component speaks for the job: one still live, else one that failed."""
    return 2 if state in _LIVE else (0 if state in (State.COMPLETED, State.UNKNOWN) else 1)


# state, raw state, cancelled by, exit code, signal, elapsed s, nodes, start, end, name, AllocTRES, energy J
_FoldArgs = tuple[State, str, str | None, int | None, int | None, int | None, str, str | None, str | None, str, str,
                  int | None]


class _Fold:
    """One array element while its lines are read: its current run's facts and its steps."""

    __slots__ = ("args", "cancelled_by", "oom", "requeues", "rss", "rss_bytes", "steps")

    def __init__(self, st: SlurmState, code: int | None, sig: int | None, elapsed: int | None, nodes: str,
                 start: str | None, end: str | None, name: str, tres: str, energy: int | None) -> None:
        nodes = "" if nodes == "None assigned" else nodes  # sacct's placeholder while pending
        self.args: _FoldArgs = (st.state, st.raw, st.cancelled_by, code, sig, elapsed, nodes, start, end, name, tres,
                                energy)
        self.requeues = 0
        self.oom, self.rss, self.rss_bytes = False, "", 0.0
        self.cancelled_by: str | None = None  # a step's `CANCELLED by <uid>`
        self.steps: list[str] = []

    @classmethod
    def of_row(cls, row: SacctRow) -> _Fold:
        return cls(row.state, row.exit_code, row.exit_signal, row.elapsed_s, row.nodes, row.start, row.end,
                   row.name, row.alloc_tres, row.consumed_energy_j)

    def absorb(self, other: _Fold) -> None:
        """A further heterogeneous component (`36+1`) of the same run: not a requeue."""
        if _rank(other.args[0]) > _rank(self.args[0]):
            self.args = other.args
        self.oom = self.oom or other.oom
        self.cancelled_by = self.cancelled_by or other.cancelled_by
        if other.rss_bytes > self.rss_bytes:
            self.rss, self.rss_bytes = other.rss, other.rss_bytes
        self.steps.extend(other.steps)

    @property
    def state(self) -> State:
        return self.args[0]

    def observation(self, key: tuple[str, int | None], own_cancellers: frozenset[str]) -> JobObservation:
        state, raw, by, code, sig, elapsed, nodes, start, end, name, tres, energy = self.args
        if self.oom and state in (State.FAILED, State.CANCELLED):
            state = State.OUT_OF_MEMORY  # srun step OOM: the job line says FAILED 1:0
        elif state is State.FAILED and self.cancelled_by is not None and self.cancelled_by not in own_cancellers:
            # someone else (an operator, an account coordinator) cancelled the task's step: the
            # job line says FAILED, but a person stopped it. By root, SlurmUser or the job's own
            # user (`34.0|CANCELLED by 0|0:9` under a job `FAILED 9:0`, step_cancelled_by_uid.txt;
            # toil's 765096) the job failed, killed by the step's signal
            state, by = State.CANCELLED, self.cancelled_by
        if state not in _ENDED:
            code = sig = None  # a running job's `0:0` is no exit code yet
        return JobObservation(key, state, raw, by, code, sig, elapsed, nodes, start, end, self.rss,
                              name, self.requeues, tuple(self.steps), tres, energy)


Key = tuple[str, int | None]  # (array job id, array index); index None for a plain job


class Observed(dict[Key, JobObservation]):
    """observe_jobs' answer: one observation per element, plus the lines it had to skip, plus
    the steps of packed tasks by their attempt tokens (core/packing/pack_fates.py)."""

    skipped: list[str]
    steps: dict[str, JobObservation]

    def __init__(self) -> None:
        super().__init__()
        self.skipped = []  # "why: line" for each line skipped (a cut pending list too)
        self.steps = {}


def observe_jobs(text: str | Iterable[str], wanted: Collection[Key] | None = None,
                 reading: Reading = DEFAULT_READING, step_tokens: Collection[str] = ()) -> Observed:
    """Fold sacct text into one observation per (array job id, index). With --duplicates every
    earlier line of a JobID is an earlier run: REQUEUED after `scontrol requeue`, but PREEMPTED
    or NODE_FAIL when Slurm requeued it; the last run wins and the earlier ones count as requeues
    (not a RESIZING record, not a federation sibling's REVOKED copy, not a further heterogeneous
    component). Step lines (3 of every 4) are read on a short path: only State and MaxRSS matter
    there, and so are the lines of elements not in `wanted` (when given): `--jobs` names whole
    arrays, whose finished elements a tick no longer needs. The allocation line of an element
    (`12_3`, `12`) is read straight into its fold; other forms through `read_sacct_line`. A line
    that cannot be read is skipped and noted in `skipped`: one odd line must never take the
    tick down. A step named by one of `step_tokens` (a packed task's, whose JobName is its
    attempt token) is also read whole, into `steps`: of a pack requeued, its last run's."""
    folds: dict[Key, _Fold] = {}
    last: tuple[str, Key | None] = ("", None)  # the last element id read, and its key: its steps follow it
    out = Observed()
    for line in io.StringIO(text) if isinstance(text, str) else text:
        job_id = line[:line.find("|")]
        base, dot, step = job_id.partition(".")
        if dot and step and not job_id.endswith("]"):  # a cut pending list `1_[0-4,51-...%1]` is no step
            if base != last[0]:
                last = (base, element_key(base))
            key = last[1] if last[1] is not None else _split_key(job_id)
            fold = folds.get(key) if key is not None else None
            if fold is not None:  # the step, inline (300,000 of them at 100,000 elements)
                parts = line.split("|", _RSS + 1)
                if len(parts) > _RSS + 1:
                    raw, rss = parts[_STATE], parts[_RSS]
                    oom, by = _step_mark(raw)
                    if oom:
                        fold.oom = True
                    elif by is not None:
                        fold.cancelled_by = by
                    if rss and (size := rss_bytes(rss)) > fold.rss_bytes:
                        fold.rss, fold.rss_bytes = rss, size
                    fold.steps.append(step + ":" + raw)
                    if step_tokens and parts[_NAME] in step_tokens:
                        _read_step(out, line, key, reading)
            continue
        if wanted is not None and not dot:
            job, _, idx = base.partition("_")
            if idx.isdigit() and (job, int(idx)) not in wanted:
                continue
        if not line.strip():
            continue
        if not dot and (plain := _plain_allocation(line, base, reading.exit_codes_verbatim)) is not None:
            _place(folds, plain[0], plain[1], job_id)
            last = (base, plain[0])
            continue
        try:
            row = read_sacct_line(line, reading)
        except UnreadableLine as exc:
            out.skipped.append(f"{exc}: {line.strip()[:120]}")
            continue
        if row.step is None:
            _fold_row(folds, row, out.skipped, line)
    for key in list(folds):  # each fold freed as its observation is made
        out[key] = folds.pop(key).observation(key, reading.own_cancellers)
    return out


def _read_step(out: Observed, line: str, key: Key | None, reading: Reading) -> None:
    try:
        row = read_sacct_line(line, reading)
    except UnreadableLine as exc:
        out.skipped.append(f"{exc}: {line.strip()[:120]}")
        return
    with contextlib.suppress(ValueError):  # read_sacct_line leaves a step's Elapsed unread; a packed task's is its own
        row = replace(row, elapsed_s=_duration(line.split("|", _ELAPSED + 1)[_ELAPSED]))
    fold = _Fold.of_row(row)
    fold.rss = row.max_rss
    out.steps[row.name] = fold.observation(key or (row.array_job_id, row.array_index), reading.own_cancellers)


def element_key(base: str) -> Key | None:
    """The key of a plain element id (`12_3`, `12`) as observations are keyed; None for other forms."""
    job, _, idx = base.partition("_")
    if not (job.isdigit() and (not idx or idx.isdigit())):
        return None
    return job, int(idx) if idx else None


def _split_key(job_id: str) -> Key | None:
    """The element of a step line in another form (het job `5+1.batch`, …): the full grammar."""
    ids = _split_job_id(job_id)
    return (ids[0], ids[1]) if ids else None


def _plain_allocation(line: str, base: str, verbatim: bool) -> tuple[Key, _Fold] | None:
    """An allocation line of a plain element read straight into a fold, as `read_sacct_line`
    reads it; None when the line is anything else or has anything odd (that path then reads it,
    and says why it skips it)."""
    key = element_key(base)
    if key is None:
        return None
    p = line.rstrip("\n").split("|", len(SACCT_FIELDS) - 1)
    if len(p) != len(SACCT_FIELDS) or "\ufffd" in line:
        return None
    try:
        elapsed = _duration(p[_ELAPSED])
        _duration(p[_LIMIT])  # unread here, but a line whose Timelimit cannot be read is skipped
    except ValueError:
        return None
    code, sig = shell_exit(p[_EXIT], p[_DERIVED], verbatim)
    start, end = p[_START], p[_END]  # the usual `2026-11-24T03:12:08`: from_slurm's first case, inline
    return key, _Fold(_state(p[_STATE]), code, sig, elapsed, p[_NODES],
                      start + "+00:00" if len(start) == 19 else _time(start),
                      end + "+00:00" if len(end) == 19 else _time(end), p[_NAME], p[_TRES],
                      consumed_energy_j(p[_ENERGY]))


def _fold_row(folds: dict[Key, _Fold], row: SacctRow, skipped: list[str], line: str) -> None:
    if row.pending_indices or row.pending_cut:
        if row.pending_cut:
            skipped.append("pending index list cut (SLURM_BITSTR_LEN); only the elements it names "
                           f"for sure were read: {line.strip()[:120]}")
        for element in row.pending_indices:
            if (row.array_job_id, element) not in folds:
                folds[(row.array_job_id, element)] = _Fold.of_row(row)
        return
    _place(folds, (row.array_job_id, row.array_index), _Fold.of_row(row), row.job_id)


def _place(folds: dict[Key, _Fold], key: Key, fold: _Fold, job_id: str) -> None:
    """A run's allocation line: the element's first, a further het component, or a later run."""
    earlier = folds.get(key)
    if earlier is None:
        folds[key] = fold
    elif "+" in job_id and not job_id.endswith("+0"):
        earlier.absorb(fold)
    elif fold.state is State.UNKNOWN and fold.args[1].startswith("REVOKED"):
        return  # a federation sibling's copy: the run is elsewhere, never a requeue
    else:
        revoked_or_resized = earlier.args[1].startswith(("REVOKED", "RESIZING"))
        fold.requeues = earlier.requeues + (0 if revoked_or_resized else 1)
        folds[key] = fold
