"""When the control loop counts as stalled (core/screens/stall.py), as a table."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from campaignctl.core.screens.stall import assess_ticks, human, stall_threshold_s

NOW = datetime(2026, 11, 24, 3, 0, tzinfo=timezone.utc)


def ago(seconds: int) -> datetime:
    return NOW - timedelta(seconds=seconds)


@pytest.mark.parametrize(("last_tick_s", "held_s", "interval_s", "setting_s", "stalled", "says"), [
    (60, None, 300, None, False, ""),  # ticking every 5 min, the last one a minute ago
    (60, 200, 300, None, False, ""),  # a tick running for 200 s: slow, not stalled
    (60, 1208, 300, None, True, "pid 4242 has held the reconcile lock for 20m 8s, more than 15m"),
    (60, 901, 300, None, True, "(3 cron intervals of 5m)"),
    (60, 900, 300, None, False, ""),  # exactly three intervals: not yet
    (1000, None, 300, None, True, "the last tick that observed Slurm finished 16m 40s ago"),
    (1000, None, None, None, False, ""),  # no cron entry: people run it by hand, its age says nothing
    (None, 1000, None, None, True, "more than 15m (3 × 5m: no cron interval recorded)"),
    (60, 130, 300, 120, True, "more than 2m (CAMPAIGNCTL_STALL_AFTER)"),  # the setting wins
    (None, None, 60, None, False, ""),  # cron just installed, no tick yet
])
def test_stall_verdicts(last_tick_s: int | None, held_s: int | None, interval_s: int | None,
                        setting_s: int | None, stalled: bool, says: str) -> None:
    health = assess_ticks(NOW, None if last_tick_s is None else ago(last_tick_s),
                          None if held_s is None else "4242", None if held_s is None else ago(held_s),
                          interval_s, setting_s)
    assert health.stalled is stalled
    assert says in health.message and bool(health.message) is stalled
    assert health.held_s == held_s and health.last_tick_age_s == last_tick_s


def test_a_stalled_holder_is_named_with_how_to_find_its_hung_command() -> None:
    health = assess_ticks(NOW, ago(60), "4242", ago(1208), 300, None)
    assert "ps -o pid,etime,args --ppid 4242" in health.message


@pytest.mark.parametrize(("interval_s", "setting_s", "threshold"), [(300, None, 900), (60, None, 180),
                                                                    (None, None, 900), (300, 600, 600)])
def test_threshold(interval_s: int | None, setting_s: int | None, threshold: int) -> None:
    assert stall_threshold_s(interval_s, setting_s) == threshold


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (45, "45s"), (120, "2m"), (1208, "20m 8s"),
                                               (3600, "1h"), (3725, "1h 2m 5s")])
def test_human(seconds: int, text: str) -> None:
    assert human(seconds) == text
