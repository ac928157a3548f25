"""`status --watch`: one sacct per redraw, a busy Slurm shows the stored state marked stale, Ctrl-C
exits 130 with no traceback, and --json is refused."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from campaignctl.cli import app, live
from campaignctl.services.submit import submit
from tests.cli.test_cli import run_cli
from tests.conftest import COMMAND_TIMEOUT_S, REPO, write_spec
from tests.fakeslurm import FakeSlurm

BUSY = "sacct: error: Problem talking to the database: Connection refused"


def test_watch_redraws_with_one_sacct_each_until_ctrl_c(tmp_path: Path, fake_slurm: FakeSlurm,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    submit(write_spec(tmp_path, "name: w\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1]}\n"))
    sleeps: list[float] = []

    def pause(stop: threading.Event, seconds: float) -> bool:
        sleeps.append(seconds)
        if len(sleeps) == 2:  # Slurm busy for the third view
            fake_slurm.fail_always["sacct"] = BUSY
        elif len(sleeps) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: the watch's handler asks the loop to stop
        return stop.wait(0.5 if len(sleeps) == 3 else 0)

    monkeypatch.setattr(live, "_pause", pause)
    monkeypatch.setenv("COLUMNS", "200")
    done = CliRunner().invoke(app, ["status", "w", "--watch", "--interval", "2"])
    assert done.exit_code == 130, done.output
    assert sleeps == [2.0, 2.0, 2.0]
    assert fake_slurm.calls["sacct"] == 1 + 1 + 2  # two views, then a busy one: status's two tries
    # not a terminal: rich prints the last view once, when the watch ends: the stored state, marked stale
    assert "w: revision 1, active" in done.output
    assert "stale: Slurm unreachable (`sacct" in done.output and "Problem talking to the database" in done.output
    assert "Ctrl-C to stop" in done.output and "Traceback" not in done.output


def test_watch_and_json_are_refused_together(tmp_path: Path) -> None:
    done = run_cli("status", "--watch", "--json", state=tmp_path)
    assert done.returncode == 2 and done.stderr == ""  # under --json, the usage error is the envelope
    error = json.loads(done.stdout)["error"]
    assert error["kind"] == "usage" and "--watch redraws a table for people" in error["message"]


def test_ctrl_c_ends_a_real_watch_with_130_and_the_view_left_on_screen(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CAMPAIGNCTL_DB_URL", "SLURM_CONF")}
    env.update(XDG_STATE_HOME=str(tmp_path), COLUMNS="120", TTY_COMPATIBLE="1")  # rich draws live, as on a tty
    proc = subprocess.Popen([sys.executable, "-m", "campaignctl", "status", "--watch", "--interval", "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stdout is not None
    seen, deadline = b"", time.monotonic() + COMMAND_TIMEOUT_S
    while seen.count(b"Ctrl-C to stop") < 2 and time.monotonic() < deadline:  # drawn, then redrawn
        if select.select([proc.stdout], [], [], 1)[0]:
            seen += os.read(proc.stdout.fileno(), 65536)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=COMMAND_TIMEOUT_S)
    assert seen.count(b"Ctrl-C to stop") >= 2, seen
    assert proc.returncode == 130, err
    assert b"no campaigns yet" in seen + out and b"Traceback" not in err
