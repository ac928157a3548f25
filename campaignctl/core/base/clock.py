"""The times campaignctl stores and compares: UTC-aware, stored as ISO 8601 with its offset
(`2026-11-24T03:12:08+00:00`).

Why: times that were naive local strings made the 10-minute `unknown_grace` fire after seconds
when a tick ran under another `TZ` than the tick before it (`missing_since` written as New York
time, compared with Tokyo's `now`: 14 h apart), and a 1 h `backoff` pass in 15 minutes across a
spring-forward jump (01:50 EST to 03:05 EDT reads as 75 minutes). Slurm's clients run with
`TZ=UTC` (adapters/proc.py), so sacct's Submit/Start/End are UTC too.

Rows written before this (sacct's End, `missing_since`, `ticks.clock`: naive local strings) do
not say which zone wrote them; they are read as the local time of the reading process, the best
guess available (the same machine and `TZ` as the cron line that wrote them, as a rule).
"""

from __future__ import annotations

from datetime import datetime, timezone

UTC = timezone.utc


def utc(value: datetime) -> datetime:
    """`value` in UTC; a naive `value` is taken as the local time of this process."""
    return value.astimezone(UTC)


def read_time(text: str) -> datetime:
    """A stored time → aware UTC (a naive string, from before times were UTC: local time)."""
    return utc(datetime.fromisoformat(text))


def epoch(text: str) -> float:
    """A stored time → seconds since the epoch (a naive string, from before times were UTC: local time)."""
    return read_time(text).timestamp()


def stamp(value: datetime) -> str:
    """The stored form: UTC, whole seconds, `+00:00`."""
    return utc(value).replace(microsecond=0).isoformat()


def restamp(text: str | None) -> str | None:
    """A stored time in the stored form (an old naive row's value converted), None kept."""
    return None if text is None else stamp(read_time(text))


def from_slurm(text: str) -> str:
    """A time Slurm printed under `TZ=UTC` with SLURM_TIME_FORMAT=standard
    (`2026-11-24T03:12:08`) → the stored form. Text in no ISO form is kept as it is: the rule
    that reads it fails the tick, as it always did, rather than guess."""
    if len(text) == 19:
        return text + "+00:00"
    try:
        return stamp(datetime.fromisoformat(text).replace(tzinfo=UTC))
    except ValueError:
        return text


def to_slurm(value: datetime) -> str:
    """`value` as a Slurm client running under `TZ=UTC` reads it (`sacct -S`)."""
    return utc(value).strftime("%Y-%m-%dT%H:%M:%S")


def brief(seconds: int | float | None) -> str:
    """A duration in one or two units for a narrow column: 45 → '45s', 2280 → '38m',
    7500 → '2h05m', 190000 → '2d04h'; None → '-'."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"
