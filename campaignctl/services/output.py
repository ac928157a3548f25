"""`output`: an attempt's output.log (the program's stdout and stderr, written by the job-side
runner under `<run_dir>/tasks/<index>/<attempt token>/`), whole, its last lines, or followed
until the attempt ends, with the secrets it printed masked."""

from __future__ import annotations

import codecs
import errno
import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from pathlib import Path

from campaignctl.adapters import job_files, output_log, slurm
from campaignctl.adapters.store import Store
from campaignctl.core.base.clock import read_time
from campaignctl.core.base.errors import (
    InputError,
    NotFoundError,
    NotStartedError,
    PermissionDeniedError,
    SlurmTransientError,
    SlurmUnavailableError,
)
from campaignctl.core.base.redact import mask_assignments
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.model.attempt_paths import AttemptPaths
from campaignctl.core.model.records import AttemptRecord
from campaignctl.core.model.slurm_states import TERMINAL
from campaignctl.core.screens.status import index_ranges
from campaignctl.services.campaigns import find_campaign

POLL_S = 1.0  # how often a followed file is read again
STATE_EVERY_S = 5.0  # how often sacct is asked whether the attempt ended


@dataclass(frozen=True, slots=True)
class OutputTarget:
    campaign: str
    task: int
    attempt: int  # 1 = the task's first attempt
    attempts: int  # how many the task has
    token: str
    job_id: str | None
    state: str  # as the last tick stored it
    path: str
    created_at: str = ""
    slurm_log: str = ""  # the job's own --output file, where slurmstepd says why it ended it

    @property
    def described(self) -> str:
        return f"task {self.task} attempt {self.attempt} of {self.campaign!r}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def name_outputs(decisions: Sequence[Decision], run_dir: str) -> list[Decision]:
    """A give-up's reason ends with where the program's output is: the traceback that explains
    it is the next thing one reads (`campaignctl output NAME TASK` prints it)."""
    return [replace(d, reason=f"{d.reason} Output: {AttemptPaths.of(run_dir, d.task_index, d.attempt_token).output()}")
            if d.action == "give_up" else d for d in decisions]


def locate(name: str, task: int, attempt: int | None = None) -> OutputTarget:
    """The output file of `attempt` (default: the latest) of `task`; NotFoundError (exit 4), with
    the range that exists, for a task or attempt that does not."""
    store = Store.open()
    record = find_campaign(store, name)
    tasks = store.task_params(record.id)
    if task not in tasks:
        raise NotFoundError(f"campaign {name!r} has no task {task}", f"its tasks are {index_ranges(tasks)}")
    mine = [a for a in store.attempts(record.id) if a.task_index == task]
    if not mine:
        raise NotFoundError(f"task {task} of {name!r} has no attempt yet: it was not submitted",
                            f"`campaignctl status {name} --task {task}` says why")
    chosen = mine[-1] if attempt is None else next((a for a in mine if a.attempt_number == attempt), None)
    if chosen is None:
        raise NotFoundError(f"task {task} of {name!r} has no attempt {attempt}",
                            f"its attempts are {index_ranges(a.attempt_number for a in mine)}")
    return _target(record.name, record.run_dir, chosen, len(mine))


def _target(name: str, run_dir: str, attempt: AttemptRecord, count: int) -> OutputTarget:
    path = AttemptPaths.of(run_dir, attempt.task_index, attempt.token).output()
    # submitit's `%A_%a_%t_log.out` for Slurm task 0 of the element (rank 0 of a multi-node attempt)
    slurm_log = str(Path(run_dir) / "slurm" / f"{attempt.job_id}_0_log.out") if attempt.job_id else ""
    return OutputTarget(name, attempt.task_index, attempt.attempt_number, count, attempt.token,
                        attempt.job_id, attempt.state, str(path), attempt.created_at, slurm_log)


# What slurmstepd and srun print when Slurm ends a job (tests/fixtures/slurm_logs/): the program's
# own output just stops there, mid-line or after its last print
SLURM_ENDINGS = re.compile(r"oom-kill|Out Of Memory|Exceeded job memory limit|DUE TO TIME LIMIT|"
                           r"DUE TO PREEMPTION|DUE TO NODE FAILURE|CANCELLED AT")
SLURM_LOG_TAIL = 64 * 1024


def slurm_endings(target: OutputTarget) -> list[str]:
    """Slurm's own lines on why it ended the attempt (`slurmstepd-node2: error: Detected 1
    oom-kill event(s)…`, `*** JOB 7183 … CANCELLED AT … DUE TO TIME LIMIT ***`), from the tail of the
    job's log (the job's own: only its attempt's lines); none while the job has not written one,
    or where it is not a regular file."""
    if not target.slurm_log:
        return []
    try:
        with job_files.regular_file(target.slurm_log) as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - SLURM_LOG_TAIL))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if SLURM_ENDINGS.search(line)]


def not_started(target: OutputTarget) -> NotStartedError:
    job = f", job {target.job_id}" if target.job_id else ""
    return NotStartedError(f"{target.described} has no output yet ({target.state}{job}): {target.path} "
                           "is written once the job starts",
                           f"`campaignctl output {target.campaign} {target.task} -f` waits for it and follows it")


def first_offset(target: OutputTarget, tail: int | None) -> int:
    """Where reading starts: the beginning, or the last `tail` lines. NotStartedError (exit 6)
    while the file is not there."""
    path = Path(target.path)
    if not is_written(target):
        raise not_started(target)
    return 0 if tail is None else output_log.tail_offset(path, tail)


def is_written(target: OutputTarget) -> bool:
    """Whether the runner wrote the output file yet. What it never writes there (a symlink, a
    FIFO, a directory: the job, or a member of a shared campaign's group, can put one in its
    place) is exit 3; a file this user may not read, exit 77."""
    try:
        os.close(job_files.open_regular(target.path))
    except FileNotFoundError:
        return False
    except PermissionError as exc:
        raise PermissionDeniedError(f"{target.path}: {exc.strerror}", "the attempt's owner can read it, "
                                    "or share the run directory with your group") from exc
    except OSError as exc:
        what = "a symlink" if exc.errno == errno.ELOOP else exc.strerror
        raise InputError(f"{target.path} is {what}, not the file the runner writes: campaignctl does not read it",
                         "look at the attempt directory; whoever can write it replaced output.log") from exc
    return True


def read_text(target: OutputTarget, offset: int) -> Iterator[str]:
    """The file from `offset` to its current end, as text: bytes that are not UTF-8 become U+FFFD
    (a program may print anything), and a character cut between two reads is kept whole."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for chunk in _chunks(Path(target.path), offset):
        yield decoder.decode(chunk)
    yield decoder.decode(b"", final=True)


def masked(chunks: Iterable[str]) -> Iterator[str]:
    """`chunks` with the secrets a program printed masked (core/base/redact.py: `DB_PASS=…`,
    `--password …`, `Bearer …`), a line at a time: a secret cut between two reads is masked whole.
    A line still being written (a progress bar redrawn with \r counts as ended) waits for its end."""
    pending = ""
    for text in chunks:
        pending += text
        cut = max(pending.rfind("\n"), pending.rfind("\r")) + 1
        if cut:
            yield mask_assignments(pending[:cut])
            pending = pending[cut:]
    if pending:
        yield mask_assignments(pending)


def _chunks(path: Path, offset: int) -> Iterator[bytes]:
    while chunk := output_log.read_from(path, offset):
        offset += len(chunk)
        yield chunk


def follow(target: OutputTarget, tail: int | None) -> Iterator[str]:
    """The file's text as it grows (from its last `tail` lines, else from the beginning), until
    the attempt has ended (sacct, asked every STATE_EVERY_S; a Slurm that does not answer keeps
    the follow going) and everything it wrote was read. Waits for a pending attempt to start."""
    path = Path(target.path)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset: int | None = None
    checked, ended = 0.0, target.state in TERMINAL  # the last tick saw it end: read it all, done
    while True:
        if offset is None and is_written(target):
            offset = output_log.tail_offset(path, tail) if tail is not None else 0
        if offset is not None:
            for chunk in _chunks(path, offset):
                offset += len(chunk)
                yield decoder.decode(chunk)
        if ended:
            if offset is None:
                raise NotStartedError(f"{target.described} ended without writing {target.path}",
                                      f"`campaignctl log {target.campaign} --task {target.task}` says what happened")
            yield decoder.decode(b"", final=True)
            return
        if time.monotonic() - checked >= STATE_EVERY_S:
            checked, ended = time.monotonic(), has_ended(target)
            if ended:
                continue  # one last read: the runner flushed before the job ended
        time.sleep(POLL_S)


def has_ended(target: OutputTarget) -> bool:
    """sacct's answer for the attempt's job: a terminal state. One try, 20 s at most: following
    goes on meanwhile, so a busy Slurm only delays the end."""
    if target.job_id is None or not target.created_at:
        return False
    array_id, _, index = target.job_id.partition("_")
    key = (array_id, int(index) if index.isdigit() else None)
    since = read_time(target.created_at) - timedelta(hours=1)  # slack for clock skew, as status
    try:
        seen = slurm.observe([array_id], since, wanted={key}, timeout=20, attempts=1).get(key)
    except (SlurmTransientError, SlurmUnavailableError):
        return False
    return seen is not None and seen.state.value in TERMINAL
