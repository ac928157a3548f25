"""Files campaignctl writes by temp-then-rename (`report --out`, `log export`, `metrics
--textfile`, attempt files): the temp file is a new random name in the target's directory, so a
symlink another user planted at the old predictable `.NAME.tmpPID` is never followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from campaignctl.adapters.paths import open_atomic, public_dir, write_atomic, write_public


def test_a_planted_symlink_at_the_old_temp_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    target = tmp_path / "out.prom"
    (tmp_path / f".out.prom.tmp{os.getpid()}").symlink_to(victim)
    write_public(target, b"metric 1\n")
    write_atomic(target, "metric 2\n")
    assert victim.read_text() == "keep me\n" and target.read_text() == "metric 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".out.prom.tmp{os.getpid()}", "out.prom", "victim"]


def test_modes_public_exact_atomic_under_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_public(tmp_path / "shared.html", b"<html>", 0o644)
        write_atomic(tmp_path / "mine.json", "{}", 0o644)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "shared.html").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "mine.json").stat().st_mode) == 0o600


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "log.jsonl"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), open_atomic(target) as handle:
        handle.write("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]


def test_a_report_directory_is_never_wider_than_0755(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        public_dir(tmp_path / "reports" / "sweep")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "reports").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "reports" / "sweep").stat().st_mode) == 0o755
