"""adapters/output_log.tail_offset: where the last N lines begin, read backwards in blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters import output_log

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
