"""What `status` shows per task (core/screens/status.py, core/base/clock.brief,
core/screens/stall.loop_warnings), as tables."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from campaignctl.core.base.clock import brief
from campaignctl.core.model.records import HistoryRow
from campaignctl.core.screens.stall import assess_ticks, loop_warnings
from campaignctl.core.screens.status import (
    TaskRow,
    collapse,
    index_ranges,
    live,
    param_digits,
    param_text,
    select_rows,
    task_rows,
    varying_keys,
)
from campaignctl.core.slurm.sacct import observe_jobs

NOW = datetime(2026, 11, 24, 3, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(("seconds", "shown"), [
    (None, "-"), (0, "0s"), (45, "45s"), (60, "1m"), (2280, "38m"), (3599, "59m"), (3600, "1h00m"),
    (7500, "2h05m"), (86399, "23h59m"), (190000, "2d04h"), (-5, "0s"),
])
def test_brief_durations(seconds: int | None, shown: str) -> None:
    assert brief(seconds) == shown


@pytest.mark.parametrize(("indices", "shown"), [
    ([], ""), ([3], "3"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"), ([9, 8, 8, 1], "1,8-9"),
])
def test_index_ranges(indices: list[int], shown: str) -> None:
    assert index_ranges(indices) == shown


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"


def history(task: int, number: int, state: str, exit_code: int | None, params: str = "{}",
            job: str | None = None) -> HistoryRow:
    return HistoryRow(number, task, number, 0, f"tok{task}.{number}", job or f"57_{task}", state, state, exit_code,
                      "node1", 60 * number, "", None, None, "{}", "sub", "released",
                      "2026-11-24T02:00:00+00:00", params)


def test_a_running_task_shows_no_exit_code_and_an_ended_one_does() -> None:
    """sacct prints ExitCode 0:0 for a running job (preempted_requeued.txt, its second run, job
    33); array_mixed.txt's element 60_1 FAILED 2:0. Job 33's lines are read as element 60_9."""
    running = [line.replace("33|33|", "60_9|69|").replace("33.batch|33.batch|", "60_9.batch|69.batch|")
               for line in (FIXTURES / "preempted_requeued.txt").read_text().splitlines()[2:4]]
    mixed = (FIXTURES / "array_mixed.txt").read_text().splitlines()
    observed = observe_jobs([*mixed, *running])
    rows = task_rows({2: {"lr": 0.3}},
                     [history(0, 1, "PENDING", None, job="60_9"), history(1, 1, "RUNNING", None, job="60_1")],
                     observed)
    assert [(r.state, r.exit_code, r.elapsed_s, r.token) for r in rows] == [
        ("RUNNING", None, 10, "tok0.1"), ("FAILED", 2, 1, "tok1.1"), ("NOT_SUBMITTED", None, None, "")]


def test_a_settled_attempt_is_shown_as_stored_and_only_live_ones_are_asked() -> None:
    """COMPLETED, FAILED, TIMEOUT… never change on their own: status does not ask sacct for them.
    A PREEMPTED or NODE_FAIL job Slurm may requeue is asked; one sacct does not know is UNKNOWN."""
    stored = [history(0, 1, "COMPLETED", 0), history(1, 1, "PREEMPTED", None), history(2, 1, "RUNNING", None),
              history(3, 1, "FAILED", 1)]
    assert [r.task_index for r in live(stored)] == [1, 2]
    rows = task_rows({}, stored, {})
    assert [(r.index, r.state, r.exit_code, r.elapsed_s) for r in rows] == [
        (0, "COMPLETED", 0, 60), (1, "UNKNOWN", None, None), (2, "UNKNOWN", None, None), (3, "FAILED", 1, 60)]


def test_stored_rows_are_the_latest_attempt_as_the_last_tick_left_it() -> None:
    rows = task_rows({0: {"batch": 64}, 1: {"batch": 64}, 2: {"batch": 8}},
                     [history(0, 1, "OUT_OF_MEMORY", 0), history(0, 2, "RUNNING", 0, '{"batch": 32}'),
                      history(1, 1, "COMPLETED", 0, '{"batch": 64}')], {}, stale=True)
    assert [(r.index, r.params, r.state, r.attempts, r.exit_code, r.elapsed_s, r.token) for r in rows] == [
        (0, {"batch": 32}, "RUNNING", 2, None, 120, "tok0.2"),  # its own params; no exit while running
        (1, {"batch": 64}, "COMPLETED", 1, 0, 60, "tok1.1"),
        (2, {"batch": 8}, "NOT_SUBMITTED", 0, None, None, ""),
    ]


def rows_in(*states: str) -> list[TaskRow]:
    return [TaskRow(i, {"i": i, "data": "/d"}, s, 1, None, "", None, None) for i, s in enumerate(states)]


def test_select_by_state_and_task_and_collapse_the_quiet_ones() -> None:
    rows = rows_in("COMPLETED", "FAILED", "NOT_PROMOTED", "NOT_PROMOTED", "RUNNING", "NOT_PROMOTED",
                   "NOT_SUBMITTED")
    assert [r.index for r in select_rows(rows, ["failed", "RUNNING"])] == [1, 4]
    assert [r.index for r in select_rows(rows, (), [4, 0])] == [0, 4]
    assert [r.index for r in select_rows(rows, ["FAILED"], [4])] == []
    assert len(select_rows(rows)) == 7
    shown, quiet = collapse(rows)
    assert [r.index for r in shown] == [0, 1, 4]
    assert quiet == {"NOT_PROMOTED": [2, 3, 5], "NOT_SUBMITTED": [6]}


def test_only_the_parameters_that_vary_are_shown_compactly() -> None:
    rows = rows_in("COMPLETED", "FAILED")
    assert varying_keys(rows) == ["i"]  # every task has data=/d
    assert varying_keys(rows[:1]) == ["i"]  # one task: its first parameter
    assert param_text({"lr": 0.1 * 0.003, "batch": 64, "data": "/d"}, ["lr", "batch"]) == "lr=0.0003 batch=64"


@pytest.mark.parametrize(("values", "shown"), [
    ([0.000654321, 0.0006543], ["0.000654321", "0.0006543"]),  # whole: 4 digits made them one
    ([0.00030000001], ["0.00030000001"]),  # 8 significant digits: still whole
    ([0.1 * 0.003, 0.01], ["0.0003", "0.01"]),  # float noise, 17 digits: 4 tell them apart
    ([0.00065432198765, 0.00065432111], ["0.000654322", "0.000654321"]),  # a sampler's: enough to differ
    ([1e-5, float("inf")], ["1e-05", "inf"]),
])
def test_parameter_values_are_shown_whole_where_short_and_always_distinguishable(
        values: list[float], shown: list[str]) -> None:
    digits = param_digits({"lr": v} for v in values)
    assert [param_text({"lr": v}, None, digits) for v in values] == [f"lr={s}" for s in shown]
    assert param_text({"flag": True, "lr": 1e-5}) == "flag=True lr=1e-05"


@pytest.mark.parametrize(("last_tick_s", "interval_s", "cron", "says"), [
    (60, 300, True, []),
    (60, None, False, ["no crontab line runs `campaignctl reconcile`: crontab: command not found"]),
    (1000, None, True, ["no reconcile tick for 16m 40s, more than 15m"]),  # a line not installed by campaignctl
    (1000, None, False, ["no crontab line"]),  # run by hand: the age says nothing more
    (1000, 300, True, []),  # stalled: status prints the stall message itself
])
def test_loop_warnings(last_tick_s: int, interval_s: int | None, cron: bool, says: list[str]) -> None:
    health = assess_ticks(NOW, datetime.fromtimestamp(NOW.timestamp() - last_tick_s, timezone.utc),
                          None, None, interval_s, None)
    warnings = loop_warnings(health, cron, "" if cron else "crontab: command not found")
    assert len(warnings) == len(says)
    for warning, start in zip(warnings, says, strict=True):
        assert warning.startswith(start)
