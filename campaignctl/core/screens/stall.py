"""Is the control loop stalled? Pure: the facts come in (when the last tick that observed Slurm
finished, who holds the reconcile lock and since when, the cron interval), a verdict goes out.

Why it matters: a hung Slurm client once held one tick for 1,208 s while every cron tick
printed 'another reconcile is running' and exited 0: nothing failed, nothing was done, nobody
was told. Stalled means the lock has been held, or no tick has completed, for longer than
STALL_INTERVALS cron intervals (or CAMPAIGNCTL_STALL_AFTER).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

STALL_INTERVALS = 3  # a tick may overrun one interval, even two; three is a stall
DEFAULT_INTERVAL_S = 300  # `campaignctl cron install --every 5`, when the interval is not known


@dataclass(frozen=True, slots=True)
class TickHealth:
    stalled: bool
    message: str  # one sentence for people ('' when all is well)
    stall_after_s: int
    interval_s: int | None = None  # the cron interval (None: no cron entry installed by campaignctl)
    last_tick_at: str | None = None  # UTC: when the last tick that observed Slurm finished
    last_tick_age_s: int | None = None
    holder_pid: str | None = None  # the process holding the reconcile lock now, if any
    held_s: int | None = None  # for how long it has held it


def stall_threshold_s(interval_s: int | None, setting_s: int | None) -> int:
    return setting_s if setting_s else STALL_INTERVALS * (interval_s or DEFAULT_INTERVAL_S)


def assess_ticks(now: datetime, last_tick_at: datetime | None, holder_pid: str | None,
                 held_since: datetime | None, interval_s: int | None, setting_s: int | None) -> TickHealth:
    """Stalled when the lock's holder has run longer than the threshold, or (cron installed)
    when the last tick that observed Slurm is older than it. Times are aware (UTC)."""
    after = stall_threshold_s(interval_s, setting_s)
    age = None if last_tick_at is None else int((now - last_tick_at).total_seconds())
    held = None if held_since is None or holder_pid is None else int((now - held_since).total_seconds())
    limit = f"more than {human(after)} ({_source(interval_s, setting_s)})"
    facts = TickHealth(False, "", after, interval_s, None if last_tick_at is None else last_tick_at.isoformat(),
                       age, holder_pid, held)
    if held is not None and held > after:
        return _stalled(facts, f"reconcile stalled: pid {holder_pid} has held the reconcile lock for "
                               f"{human(held)}, {limit}; every tick meanwhile does nothing. A Slurm command "
                               f"may hang: `ps -o pid,etime,args --ppid {holder_pid}`")
    if interval_s and age is not None and age > after:
        return _stalled(facts, f"reconcile stalled: the last tick that observed Slurm finished {human(age)} "
                               f"ago, {limit}; see reconcile.log in the state directory")
    return facts


def _source(interval_s: int | None, setting_s: int | None) -> str:
    if setting_s:
        return "CAMPAIGNCTL_STALL_AFTER"
    if interval_s:
        return f"{STALL_INTERVALS} cron intervals of {human(interval_s)}"
    return f"{STALL_INTERVALS} × {human(DEFAULT_INTERVAL_S)}: no cron interval recorded"


def _stalled(facts: TickHealth, message: str) -> TickHealth:
    return TickHealth(True, message, facts.stall_after_s, facts.interval_s, facts.last_tick_at,
                      facts.last_tick_age_s, facts.holder_pid, facts.held_s)


def human(seconds: int) -> str:
    """1208 → '20m 8s'; 3600 → '1h'; 45 → '45s'."""
    hours, rest = divmod(max(0, seconds), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return " ".join(p for p in parts if p) or "0s"


NO_CRON = "no crontab line runs `campaignctl reconcile`"


def loop_warnings(health: TickHealth, cron_installed: bool, cron_problem: str = "") -> list[str]:
    """What `status` warns about the control loop beside a stall: no crontab line, without which
    nothing retries, promotes or holds; with one, no tick for longer than the stall threshold
    (a crontab line campaignctl did not install records no interval, so no stall is judged)."""
    warnings = []
    age = health.last_tick_age_s
    if cron_installed and not health.stalled and age is not None and age > health.stall_after_s:
        warnings.append(f"no reconcile tick for {human(age)}, more than {human(health.stall_after_s)}: "
                        "retries, promotions and budget holds wait for the next one")
    if not cron_installed:
        # one line at 80 columns: what to run, or why crontab cannot be read (then no command helps)
        warnings.append(f"{NO_CRON}: {cron_problem}" if cron_problem
                        else f"{NO_CRON}; add one: campaignctl cron install")
    return warnings
