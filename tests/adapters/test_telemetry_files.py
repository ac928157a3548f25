"""Reading only what the sampler appended since the last tick."""

from __future__ import annotations

import os
from pathlib import Path

from campaignctl.adapters.telemetry_files import Position, read_new_lines


def test_reads_new_complete_lines_and_leaves_a_partial_last_line_for_later(tmp_path: Path) -> None:
    path = tmp_path / "telemetry.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": 3')  # the sampler is mid-write
    lines, pos = read_new_lines(str(path), Position())
    assert lines == ['{"a": 1}', '{"a": 2}']
    with open(path, "a") as out:
        out.write('}\n{"a": 4}\n')
    lines, pos = read_new_lines(str(path), pos)
    assert lines == ['{"a": 3}', '{"a": 4}']
    assert read_new_lines(str(path), pos) == ([], pos)


def test_a_rotated_or_truncated_file_is_read_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "telemetry.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n')
    _, pos = read_new_lines(str(path), Position())
    os.replace(path, tmp_path / "old.jsonl")  # rotated: a new file (inode) under the same name
    path.write_text('{"b": 1}\n')
    lines, pos = read_new_lines(str(path), pos)
    assert lines == ['{"b": 1}']
    path.write_text('{"c":1}\n')  # truncated in place and rewritten: shorter than the offset
    assert read_new_lines(str(path), pos)[0] == ['{"c":1}']


def test_a_missing_file_reads_nothing_and_keeps_the_position(tmp_path: Path) -> None:
    assert read_new_lines(str(tmp_path / "none.jsonl"), Position(5, 10)) == ([], Position(5, 10))
