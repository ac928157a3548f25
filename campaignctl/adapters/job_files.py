"""Files a job wrote into its attempt directory, opened as untrusted input.

The job itself, or any member of a shared campaign's group, can put anything there: a FIFO
(`open()` of it blocks until a writer comes, so a tick would hang for ever), a directory, a
device, or a symlink to a file of the user who reads it. Only a regular file, reached without
following a symlink at its last component, is read; anything else reads as an OSError, which every
caller already takes as "no file yet". Sizes are capped by the callers.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer (the
# fstat below then refuses it); on a regular file it changes nothing (open(2)).
FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# a file a person names (a spec, a policy): a symlink to it is theirs to make
NAMED = FLAGS & ~os.O_NOFOLLOW


class NotRegularFileError(OSError):
    """The path is a FIFO, directory, device or socket, not a file a job's program wrote."""


def open_regular(path: str | Path, flags: int = FLAGS) -> int:
    """A read-only descriptor of the regular file at `path`. OSError: missing, unreadable, a
    symlink (ELOOP, unless `flags` is NAMED), or not a regular file (NotRegularFileError)."""
    fd = os.open(path, flags)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFileError(errno.EINVAL, f"is {_kind(mode)}, not a file", str(path))
    return fd


@contextmanager
def regular_file(path: str | Path) -> Iterator[BinaryIO]:
    with os.fdopen(open_regular(path), "rb") as handle:
        yield handle


def read_head(path: str | Path, limit: int) -> bytes:
    """The first `limit` bytes of a regular file (OSError as open_regular)."""
    with regular_file(path) as handle:
        return handle.read(limit)


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a file")
