"""adapters/output_log.tail_offset: where the last N lines begin, read backwards in blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters import output_log
from campaignctl.adapters.output_log import program_printed
from campaignctl.core.tick.utilisation import silent_while_working

LONG = b"x" * (output_log.BLOCK + 10)  # a line longer than a block: the newline before it is a block back


@pytest.mark.parametrize(("content", "lines", "tail"), [
    (b"a\nb\nc\n", 0, b""),
    (b"a\nb\nc\n", 1, b"c\n"),
    (b"a\nb\nc\n", 2, b"b\nc\n"),
    (b"a\nb\nc\n", 9, b"a\nb\nc\n"),
    (b"a\nb\nc", 1, b"c"),  # a last line without its newline yet (the program is writing it)
    (b"", 3, b""),
    (b"\n\n", 1, b"\n"),
    (b"first\n" + LONG + b"\nlast\n", 2, LONG + b"\nlast\n"),
    (b"first\n" + LONG + b"\nlast\n", 3, b"first\n" + LONG + b"\nlast\n"),
])
def test_tail_offset(tmp_path: Path, content: bytes, lines: int, tail: bytes) -> None:
    path = tmp_path / "output.log"
    path.write_bytes(content)
    assert content[output_log.tail_offset(path, lines):] == tail


def test_only_the_programs_own_lines_count_as_output(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    assert not program_printed(log)  # not there yet
    log.write_bytes(b"campaignctl: GPU telemetry off: nvmlInit failed: NVML Shared Library Not Found\n\n")
    assert not program_printed(log)
    log.write_bytes(log.read_bytes() + b"step 1: loss 2.3\n")
    assert program_printed(log)


def test_a_busy_running_task_with_nothing_printed_is_flagged_after_two_minutes() -> None:
    assert silent_while_working("RUNNING", 121, 95.0, None)
    assert silent_while_working("RUNNING", 600, 3.0, 80.0)  # a GPU kernel-bound program
    assert not silent_while_working("RUNNING", 60, 95.0, None)  # too early to say
    assert not silent_while_working("RUNNING", 600, 2.0, None)  # idle: waiting, not buffering
    assert not silent_while_working("PENDING", 600, None, None)
