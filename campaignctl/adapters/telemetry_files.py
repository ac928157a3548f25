"""Read what the job-side sampler appended to an attempt's telemetry.jsonl since the last tick."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from campaignctl.adapters.job_files import open_regular, regular_file
from campaignctl.core.model.attempt_paths import file_in
from campaignctl.core.model.records import HistoryRow

MAX_READ = 4 * 2**20  # per file per tick; a backlog is read over the next ticks


@dataclass(frozen=True, slots=True)
class Position:
    inode: int = 0
    offset: int = 0
    behind: bool = False  # bytes past MAX_READ were left: read on, even after the attempt ended


def read_new_lines(path: str, position: Position) -> tuple[list[str], Position]:
    """Complete lines appended after `position`. A last line without its newline is left for the
    next tick (the sampler may be writing it; a job killed mid-write leaves one behind for good,
    which then simply never counts). A file replaced (other inode) or shorter than the offset
    was rotated or truncated: it is read from the start."""
    try:
        fd = open_regular(path)
    except OSError:  # missing, or not a regular file (adapters/job_files.py)
        return [], position
    try:
        st = os.fstat(fd)
        offset = position.offset if (st.st_ino == position.inode and st.st_size >= position.offset) else 0
        data = os.pread(fd, min(st.st_size - offset, MAX_READ), offset)
    except OSError:
        return [], position
    finally:
        os.close(fd)
    end = data.rfind(b"\n") + 1
    lines = data[:end].decode("utf-8", errors="replace").splitlines()
    return lines, Position(st.st_ino, offset + end, st.st_size > offset + len(data))


def node_files(attempt_dir: str, first: str) -> list[str]:
    """Every node's sampler file of a multi-node attempt: `first` (telemetry.jsonl, the first
    node's), then telemetry.node1.jsonl … in node order (adapters/runner.py names them)."""
    stem, _, ext = first.rpartition(".")
    try:
        names = [n for n in os.listdir(attempt_dir) if n.startswith(f"{stem}.node") and n.endswith(f".{ext}")]
    except OSError:
        return []
    def rank(name: str) -> int:
        digits = name[len(f"{stem}.node"):-len(f".{ext}")]
        return int(digits) if digits.isdigit() else 1 << 30
    found = [first] if os.path.exists(os.path.join(attempt_dir, first)) else []
    return [os.path.join(attempt_dir, n) for n in found + sorted(names, key=rank)]


def read_tail_lines(path: str, max_bytes: int = 32 * 2**20) -> list[str]:
    """The complete lines of a whole file, or of its last `max_bytes` (the first, partial line
    of that tail dropped): what the report draws. A missing file has none."""
    try:
        with regular_file(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    if size > max_bytes:
        data = data[data.find(b"\n") + 1:]
    return data[:data.rfind(b"\n") + 1].decode("utf-8", errors="replace").splitlines()


def files_to_read(tasks_dir: str, rows: Sequence[HistoryRow], changed: Collection[int], name: str,
                  behind: Mapping[int, tuple[int, str]] | None = None) -> dict[int, str]:
    """Attempt id → `<tasks_dir>/<task>/<token>/<name>` for every attempt that is RUNNING or changed
    state this tick (so the last lines of one that just ended are read too), and every attempt
    the cap left `behind` (id → task index, token: one that ended with more than MAX_READ unread;
    a tick no longer watches it), that has that file. Strings, not Path objects: a tick may look
    at 100,000 attempts."""
    started = task_dirs(tasks_dir)
    paths = {r.id: file_in(tasks_dir, r.task_index, r.token, name)
             for r in rows if (r.id in changed or r.state == "RUNNING") and str(r.task_index) in started}
    paths.update({i: file_in(tasks_dir, task, token, name) for i, (task, token) in (behind or {}).items()})
    return {i: path for i, path in paths.items() if os.path.exists(path)}


def task_dirs(tasks_dir: str) -> set[str]:
    """Names under `<run_dir>/tasks`: a task's directory exists once one of its attempts started
    writing there. One listing instead of a stat per attempt whose task never wrote anything
    (every attempt, when nothing ran yet or the run dir is not visible from here)."""
    try:
        return set(os.listdir(tasks_dir))
    except OSError:
        return set()

