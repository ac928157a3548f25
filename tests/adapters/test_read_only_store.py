"""A SQLite store in a directory this user cannot write (a read-only mount, a snapshot, a
directory made 0500) is read: `status`, `results` and `log` answer; a command that writes exits 73
saying so. Issue 40's probe found `status` exiting 73 there. The directory is made immutable with
`chattr +i`, which binds root too (the tests run as root, whom a 0500 mode does not stop)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from campaignctl.cli import app
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm

SPEC = """\
name: frozen
command: [python3, train.py, "{lr}"]
matrix: {lr: [0.1, 0.2]}
resources: {gpus: 1, mem: 500M, time: "00:10:00"}
"""


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    made: list[Path] = []
    yield made
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


@pytest.mark.sqlite_only(reason="a directory nobody may write is SQLite's case; PostgreSQL grants per role")
@pytest.mark.parametrize("writer", ["gone", "still open"])
def test_a_store_in_a_directory_nobody_may_write_is_read_and_a_write_is_refused(
        tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path, immutable: list[Path], writer: str) -> None:
    """`gone`: the write-ahead log was folded into the file (read immutable); `still open`: this
    process's own connections keep committed pages in it (read through it)."""
    submit(write_spec(tmp_path, SPEC))
    reconcile("frozen")
    directory = state_home / "campaignctl"
    if writer == "gone":
        with sqlite3.connect(directory / "campaignctl.db") as db:  # as when its last writer closed it
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        assert (directory / "campaignctl.db-wal").stat().st_size > 0
    made = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not available here (needs root on ext4/xfs/btrfs): {made.stderr.strip()}")
    immutable.append(directory)
    runner = CliRunner()
    shown = runner.invoke(app, ["status", "--json"])
    assert shown.exit_code == 0, shown.output  # was 73: SQLite could not create its -shm beside the file
    assert [c["name"] for c in json.loads(shown.stdout)["data"]["campaigns"]] == ["frozen"]
    assert runner.invoke(app, ["status", "frozen"]).exit_code == 0
    assert runner.invoke(app, ["results", "frozen"]).exit_code == 0
    assert runner.invoke(app, ["log", "frozen"]).exit_code == 0
    refused = runner.invoke(app, ["reconcile", "frozen"])
    assert refused.exit_code in (73, 77), refused.output
    assert "Traceback" not in refused.output
