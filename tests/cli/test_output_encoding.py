"""Output that cannot hurt the process: user strings reach charts as text (never mathtext) and a
terminal that cannot show a character gets an escape, not an internal error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from campaignctl.services.submit import submit
from tests.cli.test_cli import run_cli
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


def test_a_metric_name_with_tex_is_drawn_as_text(tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path) -> None:
    submit(write_spec(tmp_path, "name: bare\ncommand: [python3, t.py]\n"))
    done = run_cli("report", "bare", "--out", str(tmp_path / "r"), "--metric", "$\\frac{x$", "--json",
                   state=state_home)
    assert done.returncode == 0, done.stderr
    assert "frac{x$" in json.loads(done.stdout)["data"]["charts"]["chart-metrics"]


def test_a_terminal_that_cannot_show_a_character_gets_an_escape(
        tmp_path: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_spec(tmp_path, "name: enc\ncommand: [echo]\nrun_dir: runs/été→\n")
    monkeypatch.setitem(os.environ, "PYTHONIOENCODING", "ascii")
    done = run_cli("submit", str(spec), "--dry-run", state=state_home)
    assert done.returncode == 0, done.stderr
    assert "runs/\\xe9t\\xe9\\u2192" in done.stdout
