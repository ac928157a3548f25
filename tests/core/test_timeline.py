"""The campaign on a time axis as tables: when each attempt waited, ran and ended; Gantt bars;
the report's window; how decisions are drawn."""

from __future__ import annotations

import pytest

from campaignctl.core.screens.timeline import (
    DecisionPoint,
    Span,
    TimelineFacts,
    gantt_bars,
    kind_of,
    lanes,
    span_of,
    time_window,
)


def facts(state: str, ended: float | None = None, elapsed: int | None = None, seen: dict[str, float] | None = None,
          sample: float | None = None, submitted: float = 100.0) -> TimelineFacts:
    return TimelineFacts(0, 1, state, submitted, ended, elapsed, seen or {}, sample)


@pytest.mark.parametrize(("f", "started", "ended"), [
    (facts("COMPLETED", ended=1000, elapsed=300, seen={"RUNNING": 760}), 700, 1000),  # End − Elapsed, exact
    (facts("RUNNING", seen={"RUNNING": 500}, sample=480), 480, None),  # first sample before the tick saw it
    (facts("RUNNING", seen={"RUNNING": 500}), 500, None),  # to the tick's resolution
    (facts("PENDING", seen={"PENDING": 200}), None, None),
    (facts("SUBMITTED"), None, None),  # sbatch answered, no tick yet
    (facts("CANCELLED", ended=400, elapsed=0), None, 400),  # cancelled while pending: never ran
    (facts("FAILED", seen={"RUNNING": 600, "FAILED": 900}), 600, 900),  # no End recorded: the tick that saw it
    (facts("OUT_OF_MEMORY"), None, 100),  # nothing known but that it ended
    (facts("COMPLETED", ended=1000, elapsed=2000), 100, 1000),  # the controller's clock ahead: clamped
    (facts("UNKNOWN", seen={"RUNNING": 300}), 300, None),  # not terminal: still open
])
def test_span_times_from_what_the_store_knows(f: TimelineFacts, started: float | None, ended: float | None) -> None:
    span = span_of(f)
    assert (span.started, span.ended) == (started, ended)


def span(state: str, started: float | None, ended: float | None, submitted: float = 100.0, task: int = 0) -> Span:
    return Span(task, 1, state, submitted, started, ended)


@pytest.mark.parametrize(("s", "bars"), [
    (span("PENDING", None, None), [(100, 1000, "PENDING")]),
    (span("RUNNING", 300, None), [(100, 300, "PENDING"), (300, 1000, "RUNNING")]),
    (span("COMPLETED", 300, 700), [(100, 300, "PENDING"), (300, 700, "COMPLETED")]),
    (span("OUT_OF_MEMORY", 300, 400), [(100, 300, "PENDING"), (300, 400, "OUT_OF_MEMORY")]),
    (span("CANCELLED", None, 250), [(100, 250, "CANCELLED")]),  # ended while waiting: one bar, its outcome
    (span("ABANDONED", None, None), []),  # never reached Slurm
])
def test_gantt_bars_wait_then_run(s: Span, bars: list[tuple[float, float, str]]) -> None:
    assert [(b.start, b.end, b.state) for b in gantt_bars([s], now=1000)] == bars


@pytest.mark.parametrize(("spans", "others", "window"), [
    ([], [], (4600, 8200)),  # nothing yet: the last hour
    ([span("RUNNING", 300, None)], [], (100, 8200)),  # something still runs: up to now
    ([span("COMPLETED", 300, 700), span("FAILED", 200, 900)], [950], (100, 950)),  # all ended: the last event
    ([span("COMPLETED", 110, 120)], [], (100, 160)),  # at least a minute wide
    ([span("COMPLETED", 300, 700, submitted=500)], [50], (50, 700)),  # a decision before any submission
])
def test_time_window(spans: list[Span], others: list[float], window: tuple[float, float]) -> None:
    assert time_window(spans, others, now=8200) == window


@pytest.mark.parametrize(("status", "shadow", "kind"), [
    ("applied", False, "applied"), ("failed", False, "failed"), ("rejected", False, "failed"),
    ("expired", False, "failed"), ("pending", False, "waiting"), ("awaiting-approval", False, "waiting"),
    ("proposed", True, "shadow"), ("applied", True, "shadow"), ("something-new", False, "waiting"),
])
def test_decision_kinds(status: str, shadow: bool, kind: str) -> None:
    assert kind_of(DecisionPoint(1.0, 0, "r", "a", status, shadow)) == kind


def test_lanes_are_rules_in_the_order_they_first_decided() -> None:
    points = [DecisionPoint(30, 1, "failed", "give_up", "applied"), DecisionPoint(10, -1, "budget", "alert", "applied"),
              DecisionPoint(20, 2, "out_of_memory", "resubmit", "applied"),
              DecisionPoint(40, 3, "budget", "hold", "applied")]
    assert lanes(points) == ["budget", "out_of_memory", "failed"]
