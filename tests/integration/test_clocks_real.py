"""Ticks run under another TZ than the shell that submitted, on the real cluster: a cron line on
a machine set to another zone, or a colleague's shell. Each tick is its own process with its own
TZ, as cron runs it."""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters import proc
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import attempts
from campaignctl.core.base.units import parse_duration_seconds
from campaignctl.services.reconcile import reconcile
from tests.conftest import logged, write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import HERE, history, sacct_field, wait_for

pytestmark = pytest.mark.slurm
SUBMITTER = {"TZ": "America/Los_Angeles"}
KIRITIMATI = {"TZ": "Pacific/Kiritimati"}  # UTC+14: the same instant reads 22 hours later than in Los Angeles


def flaky_campaign(tmp_path: Path, name: str) -> None:
    """One task that exits 75 on attempt 1; the policy retries it after an hour."""
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    spec = write_spec(tmp_path, f"""\
name: {name}
command: [python3, chaos.py, flaky]
tasks: [{{}}]
resources: {{cpus_per_task: 1, mem: 200M, time: "00:05:00"}}
policy:
  use: default
  unknown_grace: 10m
  known_good_after: 24h
  rules: {{failed: {{backoff: 1h, backoff_factor: 1, retry_exit_codes: [75]}}}}
""", name=f"{name}.yaml")
    done = cli("submit", str(spec), env_extra=SUBMITTER)
    assert done.returncode == 0, done.stderr


def tick(name: str, env: dict[str, str]) -> dict[str, object]:
    done = cli("reconcile", name, "--json", env_extra=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def decisions(name: str) -> list[tuple[str, str]]:
    """The ticks' decisions after the first arrays' starts."""
    return [(e.rule, e.action) for e in logged(name)]


def test_a_tick_under_tz_utc_plus_14_sees_the_real_end_and_keeps_a_one_hour_backoff(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    flaky_campaign(tmp_path, "tzbackoff")

    def failed() -> bool:
        tick("tzbackoff", SUBMITTER)
        return history("tzbackoff")[-1].state == "FAILED"
    wait_for("the flaky task to fail", failed, timeout_s=240)
    for _ in range(2):
        tick("tzbackoff", KIRITIMATI)
        time.sleep(1)
    assert decisions("tzbackoff") == []  # not retried before the hour is over
    (row,) = history("tzbackoff")
    assert row.job_id is not None and row.ended_at is not None
    # sacct under TZ=UTC (what proc gives every client) prints the End the store now holds, with its offset
    assert row.ended_at == sacct_field(row.job_id, "End") + "+00:00"
    ended = datetime.fromisoformat(row.ended_at)
    assert timedelta(0) <= datetime.now(UTC) - ended < timedelta(minutes=4)
    assert row.elapsed_s == parse_duration_seconds(sacct_field(row.job_id, "Elapsed")) and row.elapsed_s < 60
    # the hour counts from that instant, whatever zone the tick runs in
    assert reconcile("tzbackoff", dry_run=True, now=ended + timedelta(minutes=59)).campaigns[0].decisions == []
    due = reconcile("tzbackoff", dry_run=True, now=ended + timedelta(minutes=61)).campaigns[0].decisions
    assert [(d.rule, d.action) for d in due] == [("failed", "resubmit")]


def test_an_attempt_missing_from_sacct_and_squeue_keeps_its_grace_when_the_next_tick_runs_in_tokyo(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    flaky_campaign(tmp_path, "tzlost")
    store = Store.open()
    (row,) = history("tzlost")
    assert row.job_id is not None
    real_job = row.job_id.split("_")[0]
    # Slurm never issued this id: sacct and squeue answer for it as for a record slurmdbd lost
    never_issued = f"{int(real_job) + 7_000_000}_0"
    with store.engine.begin() as conn:
        conn.execute(sa.update(attempts).where(attempts.c.id == row.id).values(job_id=never_issued))
    try:
        tick("tzlost", {"TZ": "America/New_York"})
        assert [r.state for r in history("tzlost")] == ["UNKNOWN"]
        time.sleep(2)
        tick("tzlost", {"TZ": "Asia/Tokyo"})  # 14 h ahead of New York: was read as 14 h missing
        assert decisions("tzlost") == []
        (missing,) = history("tzlost")
        since = datetime.fromisoformat(missing.missing_since or "")
        assert since.utcoffset() == timedelta(0) and datetime.now(UTC) - since < timedelta(minutes=1)
    finally:
        proc.run(["scancel", real_job], check=False)
