"""A stalled control loop is reported: a tick that holds the reconcile lock (a hung Slurm
client held one for 1,208 s while every cron tick said 'another reconcile is running' and
exited 0) or ticks that stopped completing show in `status`, in `metrics`, and on the stderr
of the locked cron tick, which still exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import ticks
from campaignctl.cli import app
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from campaignctl.services.ticks import cron_interval_s, record_cron_interval, tick_health
from tests.cli.test_cli import run_cli
from tests.conftest import REPO, write_spec
from tests.core.test_prometheus import parse_exposition
from tests.fakeslurm import FakeSlurm

HOLD = """\
import sys, time
from campaignctl.adapters.lock import exclusive
with exclusive("reconcile") as holder:
    assert holder is None
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def campaign(tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path) -> str:
    submit(write_spec(tmp_path, "name: hung\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1]}\n"))
    assert reconcile("hung").status == "ok"  # one tick completed
    return "hung"


@pytest.fixture
def held_lock(state_home: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holds the reconcile lock, as a tick stuck in a hung sacct would."""
    env = {**os.environ, "XDG_STATE_HOME": str(state_home)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    yield holder
    holder.kill()
    holder.wait()


def test_a_tick_holding_the_lock_too_long_is_reported_by_reconcile_status_and_metrics(
        campaign: str, held_lock: subprocess.Popen[str], state_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGNCTL_STALL_AFTER", "1s")
    threading.Event().wait(2.2)  # (the fake_slurm fixture turns time.sleep into a no-op)
    pid = str(held_lock.pid)
    tick = run_cli("reconcile", "--all", "--textfile", str(tmp_path / "c.prom"), state=state_home)
    assert tick.returncode == 0, tick.stderr  # cron: a locked tick is no failure ...
    assert f"another reconcile (pid {pid}) is running" in tick.stdout
    assert f"reconcile stalled: pid {pid} has held the reconcile lock for" in tick.stderr  # ... but cron mails this
    assert "more than 1s (CAMPAIGNCTL_STALL_AFTER)" in tick.stderr and "Traceback" not in tick.stderr
    _, written = parse_exposition((tmp_path / "c.prom").read_text())  # the locked tick wrote the export
    assert written[("campaignctl_reconcile_stalled", ())] == 1

    runner = CliRunner()  # status asks sacct: the fake Slurm, in this process
    shown = json.loads(runner.invoke(app, ["status", "--json"]).stdout)["data"]["ticks"]
    assert (shown["stalled"], shown["holder_pid"], shown["stall_after_s"]) == (True, pid, 1)
    assert shown["held_s"] >= 2
    for args in (["status"], ["status", campaign]):
        assert f"reconcile stalled: pid {pid}" in runner.invoke(app, [*args]).stdout.replace("\n", " ")

    _, samples = parse_exposition(run_cli("metrics", state=state_home).stdout)
    assert samples[("campaignctl_reconcile_stalled", ())] == 1
    assert samples[("campaignctl_reconcile_lock_held_seconds", ())] >= 2
    assert samples[("campaignctl_reconcile_stall_after_seconds", ())] == 1


def test_a_tick_holding_the_lock_briefly_is_not_a_stall(
        campaign: str, held_lock: subprocess.Popen[str], state_home: Path) -> None:
    tick = run_cli("reconcile", "--all", state=state_home)
    assert tick.returncode == 0 and tick.stderr == ""
    assert "another reconcile" in tick.stdout
    health = status().ticks
    assert health is not None and not health.stalled and health.holder_pid == str(held_lock.pid)
    assert health.stall_after_s == 900  # 3 × 5 min when no cron interval is recorded


def test_ticks_that_stopped_completing_are_a_stall_once_cron_is_installed(campaign: str, state_home: Path) -> None:
    store = Store.open()
    with store.engine.begin() as conn:  # the last completed tick: 20 minutes ago
        conn.execute(sa.update(ticks).values(finished_at="2000-01-01T00:00:00+00:00"))
    assert not tick_health(store).stalled  # no cron entry: reconcile is run by hand
    record_cron_interval(5)
    assert cron_interval_s() == 300
    health = tick_health(store)
    assert health.stalled and "the last tick that observed Slurm finished" in health.message
    assert "3 cron intervals of 5m" in health.message
    assert reconcile("hung").status == "ok"
    assert not tick_health(store).stalled
    record_cron_interval(None)
    assert cron_interval_s() is None


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "soon", "0"])
def test_a_stall_setting_that_is_no_duration_is_an_error_not_ignored(
        value: str, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGNCTL_STALL_AFTER", value)
    done = run_cli("status", state=state_home)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"CAMPAIGNCTL_STALL_AFTER={value!r} is not a duration" in done.stderr and "Traceback" not in done.stderr
