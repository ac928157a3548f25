"""Login side: the cause the job-side runner wrote into an attempt's exit.json, a plain-process
pack's task read from its files, and the one file the login side writes there: that task's stop
request (adapters/inline_pack.py)."""

from __future__ import annotations

import os
from pathlib import Path

from campaignctl.adapters.job_files import read_head
from campaignctl.core.base import bounded_json
from campaignctl.core.base.redact import mask_assignments, printable
from campaignctl.core.model.attempt_paths import EXITS, AttemptPaths, rank_of_exit
from campaignctl.core.model.records import HistoryRow
from campaignctl.core.policy.suspects import RankCause

EVIDENCE_LIMIT = 4096
EXIT_FILE_LIMIT = 256 * 1024  # the runner writes ~5 KiB at most (evidence is capped at 4 KiB)


def read_rank_causes(files: AttemptPaths) -> list[RankCause]:
    """Every rank's named cause: exit.json (rank 0, or the only process) and, in a multi-node
    attempt, each exit.rank<r>.json beside it (adapters/runner.py)."""
    found = []
    for path in sorted(files.folder.glob(EXITS)):
        rank = rank_of_exit(path.name)
        data = _read(path)  # once per file: its cause and its node
        cause = _cause_of(data)
        if cause is not None and rank.isdigit():
            found.append(RankCause(int(rank), _node_of(data), *cause))
    return found


def _node_of(data: object) -> str:
    node = data.get("node") if isinstance(data, dict) else None
    return node if isinstance(node, str) else ""


def read_returncode(files: AttemptPaths) -> int | None:
    """The program's return code as the runner recorded it in exit.json (rank 0's, or the only
    process's; -N: killed by signal N), or None (no file yet, unreadable)."""
    data = _read(files.exit())
    code = data.get("returncode") if isinstance(data, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def read_cause(path: Path) -> tuple[str, str] | None:
    """(cause, evidence) from exit.json, or None: no file (the job died before the runner could
    write it, or the shared filesystem has not shown it yet), unreadable, or no cause named.
    Secrets are masked and control characters dropped from both (core/base/redact.py)."""
    return _cause_of(_read(path))


def _cause_of(data: object) -> tuple[str, str] | None:
    if not isinstance(data, dict):
        return None
    cause, evidence = data.get("cause"), data.get("evidence")
    if not isinstance(cause, str) or not cause:
        return None
    # written by the job: an older runner masked nothing, and any writer may put escape sequences
    shown = printable(mask_assignments(evidence if isinstance(evidence, str) else ""))
    return printable(cause)[:64], shown[:EVIDENCE_LIMIT]


def read_inline_files(run_dir: str, row: HistoryRow) -> tuple[object, object]:
    """The attempt's started.json and exit.json values (None each where missing or unreadable):
    a plain-process pack's task has no step, and these are its fate (core/packing/inline_fates.py)."""
    files = AttemptPaths.of(run_dir, row.task_index, row.token)
    return _read(files.started()), _read(files.exit())


def request_stop(run_dir: str, task_index: int, token: str) -> bool:
    """Ask a plain-process pack's task to stop (its runner ends it within a second or two, cause
    `stopped`); False when its attempt directory is not there (it never started, or not yet)."""
    files = AttemptPaths.of(run_dir, task_index, token)
    try:
        fd = os.open(files.stop_request, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:  # no directory yet (ENOENT), or a symlink in its place (ELOOP): never written through
        return False
    os.close(fd)
    return True


def _read(path: Path) -> object:
    """exit.json's value; None where there is no regular file, or no bounded JSON in it."""
    try:
        return bounded_json.loads(read_head(path, EXIT_FILE_LIMIT), max_len=EXIT_FILE_LIMIT)
    except (OSError, ValueError):
        return None
