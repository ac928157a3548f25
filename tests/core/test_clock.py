"""Stored and compared times: UTC-aware; old naive rows read as local time; sacct's text (run
under TZ=UTC) read as UTC. Real Slurm: tests/integration/test_clocks_real.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from campaignctl.core.base.clock import from_slurm, read_time, restamp, stamp, to_slurm, utc
from campaignctl.core.decisions.decision import TaskView
from campaignctl.core.slurm.sacct import observe_jobs
from campaignctl.core.tick.decide import decide_task
from tests.core.test_decide import attempt, with_rule
from tests.zones import zone

__all__ = ["zone"]  # the fixture
FIXTURES = Path(__file__).parent.parent / "fixtures" / "sacct"
ONE_HOUR = with_rule("failed", backoff_s=3600, backoff_factor=1)
NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def test_stored_form_is_utc_with_its_offset_whole_seconds() -> None:
    assert stamp(datetime(2026, 11, 24, 12, 12, 8, 999, tzinfo=UTC)) == "2026-11-24T12:12:08+00:00"
    assert stamp(datetime.fromisoformat("2026-11-24T21:12:08+09:00")) == "2026-11-24T12:12:08+00:00"
    assert read_time("2026-11-24T21:12:08+09:00") == datetime(2026, 11, 24, 12, 12, 8, tzinfo=UTC)


@pytest.mark.parametrize(("tz", "naive", "as_utc"), [
    ("Asia/Tokyo", "2026-11-24T21:12:08", "2026-11-24T12:12:08+00:00"),
    ("America/New_York", "2026-11-24T07:12:08", "2026-11-24T12:12:08+00:00"),
    ("Pacific/Kiritimati", "2026-11-25T02:12:08", "2026-11-24T12:12:08+00:00"),
    ("UTC", "2026-11-24T12:12:08", "2026-11-24T12:12:08+00:00"),
    ("America/New_York", "2026-03-08T01:59:59", "2026-03-08T06:59:59+00:00"),  # EST, just before the jump
    ("America/New_York", "2026-03-08T03:00:00", "2026-03-08T07:00:00+00:00"),  # EDT, just after
])
def test_a_naive_row_from_before_is_local_time_of_the_reading_process(
        zone: Callable[[str], None], tz: str, naive: str, as_utc: str) -> None:
    zone(tz)
    assert restamp(naive) == as_utc and stamp(utc(datetime.fromisoformat(naive))) == as_utc
    assert restamp(as_utc) == as_utc and restamp(None) is None  # new rows whatever the zone


def test_slurm_times_are_read_and_written_as_utc(zone: Callable[[str], None]) -> None:
    zone("Asia/Tokyo")
    assert from_slurm("2026-11-24T03:11:54") == "2026-11-24T03:11:54+00:00"
    assert from_slurm("2026-11-24T03:11") == "2026-11-24T03:11:00+00:00"
    assert from_slurm("Tue Nov 24 03:11:54 2026") == "Tue Nov 24 03:11:54 2026"  # not ISO: kept, never guessed
    assert to_slurm(datetime(2026, 11, 24, 12, 0, tzinfo=UTC)) == "2026-11-24T12:00:00"
    assert to_slurm(datetime(2026, 11, 24, 21, 0)) == "2026-11-24T12:00:00"  # a naive one is local (Tokyo)


def test_the_recorded_sacct_text_under_tz_utc_gives_the_moment_under_tokyo_does_not(
        zone: Callable[[str], None]) -> None:
    zone("America/New_York")  # the parser never reads the process's zone
    utc_obs = observe_jobs((FIXTURES / "tz_utc.txt").read_text().splitlines(True))[("647", 0)]
    assert (utc_obs.start, utc_obs.end) == ("2026-11-24T03:11:53+00:00", "2026-11-24T03:11:54+00:00")
    # the same job's End under TZ=Asia/Tokyo: nine hours off when read as UTC, which is why the
    # clients run under TZ=UTC and nowhere else
    tokyo_obs = observe_jobs((FIXTURES / "tz_tokyo.txt").read_text().splitlines(True))[("647", 0)]
    assert tokyo_obs.end is not None
    assert read_time(tokyo_obs.end) - read_time(utc_obs.end or "") == timedelta(hours=9)


# (stored by the tick before: missing_since / ended_at, written under one zone; this tick's zone;
#  what decide does now): the moments are seconds apart, whatever the zones' wall clocks read
ACROSS_ZONES = [
    pytest.param("UNKNOWN", {"missing_since": "2026-11-24T11:59:55+00:00"}, "Asia/Tokyo", None, id="grace-new-row"),
    pytest.param("UNKNOWN", {"missing_since": "2026-11-24T11:49:59+00:00"}, "Asia/Tokyo", "lost", id="grace-over"),
    pytest.param("FAILED", {"ended_at": "2026-11-24T11:59:58+00:00", "exit_code": 75}, "Pacific/Kiritimati",
                 None, id="backoff-new-row"),
    pytest.param("FAILED", {"ended_at": "2026-11-24T10:59:59+00:00", "exit_code": 75}, "Pacific/Kiritimati",
                 "failed", id="backoff-over"),
    # a row the previous version wrote (naive local) on this machine, read under its zone
    pytest.param("UNKNOWN", {"missing_since": "2026-11-24T20:59:55"}, "Asia/Tokyo", None, id="grace-old-row"),
    pytest.param("FAILED", {"ended_at": "2026-11-25T01:59:58", "exit_code": 75}, "Pacific/Kiritimati",
                 None, id="backoff-old-row"),
]


@pytest.mark.parametrize(("state", "facts", "tz", "rule"), ACROSS_ZONES)
def test_grace_and_backoff_count_real_seconds_under_any_zone(
        zone: Callable[[str], None], state: str, facts: dict[str, object], tz: str, rule: str | None) -> None:
    zone(tz)
    view = TaskView(0, (attempt(state, **facts),))  # type: ignore[arg-type]
    decision = decide_task(view, ONE_HOUR, NOW)
    assert (decision.rule if decision else None) == rule
    naive_now = NOW.astimezone().replace(tzinfo=None)  # a caller's local wall-clock `now`: the same moment
    assert decide_task(view, ONE_HOUR, naive_now) == decision
