"""Read an attempt's output.log as it grows: the last lines, then whatever was appended. Only a
regular file is read, never through a symlink (adapters/job_files.py): the job, or a member of a
shared campaign's group, writes that directory."""

from __future__ import annotations

import os
from pathlib import Path

from campaignctl.adapters.job_files import read_head, regular_file

BLOCK = 1 << 16
MAX_SCAN = 256 << 20  # how far back the last lines are looked for (a log of one endless line)


def tail_offset(path: Path, lines: int) -> int:
    """Where the last `lines` lines of `path` begin, read backwards a block at a time (a training
    log can be gigabytes; its end is what one reads), at most MAX_SCAN bytes back. A last line
    without a newline counts."""
    with regular_file(path) as handle:
        pos = handle.seek(0, os.SEEK_END)
        if lines <= 0:
            return pos
        if pos:
            handle.seek(pos - 1)
            pos -= handle.read(1) == b"\n"  # the final newline ends the last line, it starts none
        seen, floor = 0, max(0, pos - MAX_SCAN)
        while pos > floor:
            start = max(floor, pos - BLOCK)
            handle.seek(start)
            block = handle.read(pos - start)
            cut = len(block)
            while (cut := block.rfind(b"\n", 0, cut)) >= 0:
                seen += 1
                if seen == lines:
                    return start + cut + 1
            pos = start
    return pos


def read_from(path: Path, offset: int, limit: int = BLOCK * 16) -> bytes:
    """Up to `limit` bytes of `path` from `offset` (b'' at its end)."""
    with regular_file(path) as handle:
        handle.seek(offset)
        return handle.read(limit)


def program_printed(path: Path) -> bool:
    """Whether the program wrote anything to its output.log: lines of campaignctl's own (the
    runner's `campaignctl: …` notes) do not count. A missing file has nothing. Reads at most the
    first BLOCK bytes: a log longer than that was written by the program."""
    try:
        head = read_head(path, BLOCK)
    except OSError:
        return False
    if len(head) >= BLOCK:
        return True
    return any(line.strip() and not line.startswith(b"campaignctl: ") for line in head.splitlines())

