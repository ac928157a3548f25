"""A per-user, non-blocking lock so that only one reconcile acts at a time (cron may start a
tick while a slow one still runs). flock(2) is released by the kernel when the process dies,
so a crashed tick never leaves a stale lock. The holder writes `PID START` (UTC) into the
file, so a stalled holder can be named and timed (`holder`)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from campaignctl.adapters import paths


@dataclass(frozen=True, slots=True)
class Holder:
    pid: str
    since: datetime  # UTC; the file's mtime when it does not say (an older version wrote only the pid)


def _path(name: str) -> Path:
    return paths.private_file(paths.state_dir() / f"{name}.lock")


@contextmanager
def exclusive(name: str = "reconcile") -> Iterator[str | None]:
    """Yields None when the lock is ours, else the holder's pid as written in the lock file."""
    path = _path(name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield _read(path).pid
            return
        os.ftruncate(fd, 0)
        stamp = f"{os.getpid()} {datetime.now(timezone.utc).isoformat(timespec='seconds')}"
        os.write(fd, stamp.encode())
        try:
            yield None
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def holder(name: str = "reconcile") -> Holder | None:
    """Who holds the lock now, or None. Asked with a shared non-blocking flock, let go at once:
    a tick starting in that instant finds the lock held and does nothing, like any locked tick.
    A lock file that does not exist is held by nobody: asking creates nothing (a reader may be
    unable to write the state directory)."""
    path = paths.state_path() / f"{name}.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read(path: Path) -> Holder:
    pid, _, since = Path(path).read_text().strip().partition(" ")
    try:
        started = datetime.fromisoformat(since)
    except ValueError:
        started = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    return Holder(pid or "unknown", started)
