"""A campaign on a time axis, for the report: when each attempt waited, ran and ended, and when
each decision was made. Pure: times are epoch seconds handed in by the caller, `now` included.

Where the times come from (the report service reads them): `submitted` is the attempt row's
creation (written just before sbatch); `ended` is sacct's End and `elapsed_s` its Elapsed, so a
finished run started at End − Elapsed, to the second. A run still going has no End yet: it
started when a reconcile tick first saw it RUNNING (so to cron's resolution), or at its first
telemetry sample if that is earlier.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from campaignctl.core.model.slurm_states import TERMINAL

NEVER_RAN = "ABANDONED"  # a submission given up before sbatch answered: no job, no bar
MIN_WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class TimelineFacts:
    """What the store knows about one attempt's times."""

    task_index: int
    attempt_number: int
    state: str  # last observed domain state, or SUBMITTING / SUBMITTED / ABANDONED before Slurm
    submitted: float
    ended: float | None = None  # sacct End
    elapsed_s: int | None = None  # sacct Elapsed
    first_seen: Mapping[str, float] = field(default_factory=dict)  # state → when a tick first saw it
    first_sample: float | None = None  # the attempt's first telemetry sample


@dataclass(frozen=True, slots=True)
class Span:
    task_index: int
    attempt_number: int
    state: str
    submitted: float
    started: float | None  # None: never ran, as far as anyone saw
    ended: float | None  # None: still waiting or running

    @property
    def ongoing(self) -> bool:
        return self.ended is None and self.state != NEVER_RAN


@dataclass(frozen=True, slots=True)
class Bar:
    """One stretch of one attempt on the Gantt chart."""

    task_index: int
    attempt_number: int
    start: float
    end: float
    state: str  # PENDING while it waited; its run's outcome (RUNNING while it runs)


@dataclass(frozen=True, slots=True)
class DecisionPoint:
    t: float
    task_index: int  # -1: the whole campaign
    rule: str
    action: str
    status: str  # applied | failed | pending | awaiting-approval | proposed | rejected | expired | withdrawn
    shadow: bool = False


def span_of(f: TimelineFacts) -> Span:
    ended = _ended(f)
    started = _started(f, ended)
    if started is not None:
        started = max(started, f.submitted)  # controller and store clocks may disagree by a second
        ended = None if ended is None else max(ended, started)
    return Span(f.task_index, f.attempt_number, f.state, f.submitted, started, ended)


def _ended(f: TimelineFacts) -> float | None:
    if f.state not in TERMINAL:
        return None
    if f.ended is not None:
        return f.ended
    seen = [t for state, t in f.first_seen.items() if state in TERMINAL]
    return min(seen) if seen else f.submitted


def _started(f: TimelineFacts, ended: float | None) -> float | None:
    if ended is not None and f.elapsed_s:  # sacct: End − Elapsed, exact to the second
        return ended - f.elapsed_s
    seen = [t for t in (f.first_seen.get("RUNNING"), f.first_sample) if t is not None]
    return min(seen) if seen else None


def gantt_bars(spans: Iterable[Span], now: float) -> list[Bar]:
    """A wait bar (submitted → started) and a run bar (started → ended, or now) per attempt. An
    attempt that ended without running (cancelled while pending) has one bar in its outcome."""
    bars = []
    for s in spans:
        if s.state == NEVER_RAN:
            continue
        if s.started is None:
            end = now if s.ended is None else s.ended
            bars.append(Bar(s.task_index, s.attempt_number, s.submitted, max(end, s.submitted),
                            "PENDING" if s.ended is None else s.state))
            continue
        bars.append(Bar(s.task_index, s.attempt_number, s.submitted, s.started, "PENDING"))
        bars.append(Bar(s.task_index, s.attempt_number, s.started, now if s.ended is None else s.ended,
                        "RUNNING" if s.ended is None else s.state))
    return bars


def time_window(spans: Sequence[Span], others: Iterable[float], now: float) -> tuple[float, float]:
    """The report's time axis: from the first submission (or event) to now while anything still
    waits or runs, else to the last thing that happened; at least a minute wide."""
    extra = list(others)
    starts = [s.submitted for s in spans if s.state != NEVER_RAN] + extra
    if not starts:
        return now - 3600.0, now
    lo = min(starts)
    if any(s.ongoing for s in spans):
        hi = now
    else:
        hi = max([lo, *extra, *(t for s in spans for t in (s.started, s.ended) if t is not None)])
    return lo, max(hi, lo + MIN_WINDOW_S)


STATUS_KIND = {"applied": "applied", "failed": "failed", "rejected": "failed", "expired": "failed",
               "withdrawn": "failed", "pending": "waiting", "awaiting-approval": "waiting", "proposed": "shadow"}


def kind_of(point: DecisionPoint) -> str:
    """How a decision is drawn: applied | failed | waiting | shadow."""
    return "shadow" if point.shadow else STATUS_KIND.get(point.status, "waiting")


def lanes(points: Iterable[DecisionPoint]) -> list[str]:
    """The rules in the order they first decided something: one row each on the timeline."""
    return list(dict.fromkeys(p.rule for p in sorted(points, key=lambda p: p.t)))
