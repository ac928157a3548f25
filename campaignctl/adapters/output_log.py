"""Read an attempt's output.log as it grows: the last lines, then whatever was appended."""

from __future__ import annotations

import os
from pathlib import Path

BLOCK = 1 << 16


def tail_offset(path: Path, lines: int) -> int:
    """Where the last `lines` lines of `path` begin, read backwards a block at a time (a training
    log can be gigabytes; its end is what one reads). A last line without a newline counts."""
    with path.open("rb") as handle:
        pos = handle.seek(0, os.SEEK_END)
        if lines <= 0:
            return pos
        if pos:
            handle.seek(pos - 1)
            pos -= handle.read(1) == b"\n"  # the final newline ends the last line, it starts none
        seen = 0
        while pos > 0:
            start = max(0, pos - BLOCK)
            handle.seek(start)
            block = handle.read(pos - start)
            cut = len(block)
            while (cut := block.rfind(b"\n", 0, cut)) >= 0:
                seen += 1
                if seen == lines:
                    return start + cut + 1
            pos = start
    return 0


def read_from(path: Path, offset: int, limit: int = BLOCK * 16) -> bytes:
    """Up to `limit` bytes of `path` from `offset` (b'' at its end)."""
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read(limit)


def program_printed(path: Path) -> bool:
    """Whether the program wrote anything to its output.log: lines of campaignctl's own (the
    runner's `campaignctl: …` notes) do not count. A missing file has nothing. Reads at most the
    first BLOCK bytes: a log longer than that was written by the program."""
    try:
        with open(path, "rb") as f:
            head = f.read(BLOCK)
    except OSError:
        return False
    if len(head) >= BLOCK:
        return True
    return any(line.strip() and not line.startswith(b"campaignctl: ") for line in head.splitlines())

