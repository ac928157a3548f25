"""A per-user, non-blocking lock so that only one reconcile acts at a time (cron may start a
tick while a slow one still runs). flock(2) is released by the kernel when the process dies,
so a crashed tick never leaves a stale lock."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from campaignctl.adapters import paths


@contextmanager
def exclusive(name: str = "reconcile") -> Iterator[str | None]:
    """Yields None when the lock is ours, else the holder's pid as written in the lock file."""
    path = paths.private_file(paths.state_dir() / f"{name}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield Path(path).read_text().strip() or "unknown"
            return
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        try:
            yield None
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
