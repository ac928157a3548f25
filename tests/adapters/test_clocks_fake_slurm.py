"""Ticks under different time zones (another shell's TZ, a cron line's, a daylight-saving jump)
against a fake Slurm whose sacct prints End in the caller's TZ, as the real one does
(adapters/proc.py FORCED). Real Slurm: tests/integration/test_clocks_real.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import attempts, ticks
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import ElementState, FakeSlurm
from tests.zones import zone

__all__ = ["zone"]  # the fixture


def campaign(tmp_path: Path, tasks: int = 2, backoff: str = "1h") -> None:
    submit(write_spec(tmp_path, f"""\
name: tz
command: [python3, train.py, "{{i}}"]
matrix: {{i: [{", ".join(str(i) for i in range(tasks))}]}}
resources: {{mem: 1G, time: "00:10:00"}}
policy: {{use: default, unknown_grace: 10m, known_good_after: 24h,
         rules: {{failed: {{backoff: {backoff}, retry_exit_codes: [75]}}}}}}
""", name="tz.yaml"))


def stored(column: str) -> set[str | None]:
    with Store.open().engine.connect() as conn:
        return set(conn.execute(sa.select(attempts.c[column])).scalars())


def test_a_tick_under_another_tz_seconds_later_does_not_end_the_unknown_grace(
        tmp_path: Path, fake_slurm: FakeSlurm, zone: Callable[[str], None]) -> None:
    zone("America/New_York")
    campaign(tmp_path)
    fake_slurm.vanished.add(min(fake_slurm.jobs, key=int))  # in neither sacct nor squeue
    assert reconcile("tz").campaigns[0].decisions == []
    time.sleep(1)
    zone("Asia/Tokyo")  # 14 hours ahead of New York in November
    assert reconcile("tz").campaigns[0].decisions == []  # was: lost → resubmit, every task
    (since,) = stored("missing_since")
    assert since is not None and since.endswith("+00:00")
    assert abs(datetime.fromisoformat(since) - datetime.now(UTC)) < timedelta(minutes=1)
    zone("Pacific/Kiritimati")
    later = reconcile("tz", now=datetime.now(UTC) + timedelta(minutes=11))  # the grace itself still ends
    assert [(d.rule, d.action) for d in later.campaigns[0].decisions] == [("lost", "resubmit")] * 2


def test_a_tick_under_another_tz_keeps_a_one_hour_backoff(
        tmp_path: Path, fake_slurm: FakeSlurm, zone: Callable[[str], None]) -> None:
    zone("Asia/Tokyo")
    campaign(tmp_path, tasks=1)
    job = min(fake_slurm.jobs, key=int)
    fake_slurm.states[(job, 0)] = ElementState("FAILED", "75:0", ended=time.time() - 2)
    assert reconcile("tz").campaigns[0].decisions == []
    (ended,) = stored("ended_at")
    assert ended is not None and ended.endswith("+00:00")  # sacct ran under TZ=UTC, read as UTC
    assert fake_slurm.env["TZ"] == "UTC"
    zone("Pacific/Kiritimati")  # UTC+14
    assert reconcile("tz").campaigns[0].decisions == []
    zone("America/Los_Angeles")
    assert reconcile("tz", now=datetime.now(UTC) + timedelta(minutes=50)).campaigns[0].decisions == []
    after = reconcile("tz", now=datetime.now(UTC) + timedelta(minutes=61))
    assert [(d.rule, d.action) for d in after.campaigns[0].decisions] == [("failed", "resubmit")]


def test_a_spring_forward_jump_does_not_skip_a_one_hour_backoff(
        tmp_path: Path, fake_slurm: FakeSlurm, zone: Callable[[str], None]) -> None:
    """New York, 2026-03-08: 02:00 EST becomes 03:00 EDT. A task failed at 01:49:30 EST; at
    03:05 EDT only 15 minutes have passed, though the wall clocks read 75 minutes apart."""
    zone("America/New_York")
    campaign(tmp_path, tasks=1)
    job = min(fake_slurm.jobs, key=int)
    failed_at = datetime(2026, 3, 8, 6, 49, 30, tzinfo=UTC)  # 01:49:30 EST
    fake_slurm.states[(job, 0)] = ElementState("FAILED", "75:0", ended=failed_at.timestamp())
    before_jump = datetime(2026, 3, 8, 1, 50)  # naive: local wall-clock time, as a caller may give it
    assert reconcile("tz", now=before_jump).campaigns[0].decisions == []
    after_jump = datetime(2026, 3, 8, 3, 5)  # 03:05 EDT = 07:05 UTC
    assert reconcile("tz", now=after_jump).campaigns[0].decisions == []  # was: retried
    with Store.open().engine.connect() as conn:
        clocks = list(conn.execute(sa.select(ticks.c.clock).order_by(ticks.c.id)).scalars())[1:]  # after submit's
    assert clocks == ["2026-03-08T06:50:00+00:00", "2026-03-08T07:05:00+00:00"]
    done = reconcile("tz", now=datetime(2026, 3, 8, 3, 50))  # 07:50 UTC: the hour has passed
    assert [(d.rule, d.action) for d in done.campaigns[0].decisions] == [("failed", "resubmit")]


def test_rows_written_before_times_were_utc_are_read_as_local_time(
        tmp_path: Path, fake_slurm: FakeSlurm, zone: Callable[[str], None]) -> None:
    """The previous version stored `missing_since` as naive local time (here Tokyo's): it is read
    as the local time of the reading process, so the same machine's next tick goes on counting."""
    zone("Asia/Tokyo")
    campaign(tmp_path)
    fake_slurm.vanished.add(min(fake_slurm.jobs, key=int))
    reconcile("tz")
    five_min_ago = (datetime.now() - timedelta(minutes=5)).replace(microsecond=0).isoformat()  # naive Tokyo
    with Store.open().engine.begin() as conn:
        conn.execute(sa.update(attempts).values(missing_since=five_min_ago))
    assert reconcile("tz").campaigns[0].decisions == []
    assert stored("missing_since") == {five_min_ago}  # the same moment: not rewritten, nor restarted
    later = reconcile("tz", now=datetime.now(UTC) + timedelta(minutes=6))
    assert [(d.rule, d.action) for d in later.campaigns[0].decisions] == [("lost", "resubmit")] * 2
