"""Is the control loop running as cron expects? The facts for `core.stall.assess_ticks`, read
without calling Slurm: the last tick in the store, the reconcile lock's holder, the interval
`campaignctl cron install` recorded, and the CAMPAIGNCTL_STALL_AFTER setting."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path

from campaignctl.adapters import lock, paths
from campaignctl.adapters.report_queries import ReportQueries
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import UsageError
from campaignctl.core.base.units import parse_interval_seconds
from campaignctl.core.screens.stall import TickHealth, assess_ticks

STALL_SETTING = "CAMPAIGNCTL_STALL_AFTER"  # e.g. 20m: overrides 3 × the cron interval
INTERVAL_FILE = "cron-interval"  # seconds between cron ticks, written by `campaignctl cron install`


def tick_health(store: Store, now: datetime | None = None) -> TickHealth:
    held = lock.holder("reconcile")
    return assess_ticks(now or datetime.now(timezone.utc), _utc(ReportQueries(store.engine).last_tick_at()),
                        held.pid if held else None, held.since if held else None,
                        cron_interval_s(), stall_setting_s())


def stall_setting_s() -> int | None:
    """CAMPAIGNCTL_STALL_AFTER (`20m`, `1200`), None unset. A value that is no duration (`nan`)
    used to be ignored without a word: it is an error (exit 2), as CAMPAIGNCTL_LEASE_TTL's is."""
    text = os.environ.get(STALL_SETTING, "").strip()
    if not text:
        return None
    seconds = parse_interval_seconds(text)
    if seconds is None or seconds <= 0 or not text[:1].isdigit():
        raise UsageError(f"{STALL_SETTING}={text!r} is not a duration",
                         "give seconds or 90s, 20m, 1h; unset it for 3 cron intervals")
    return seconds


WARN_EVERY_S = 60  # a warning that repeats on every screen (no crontab line) is shown this often


def due_warning(name: str, now: float | None = None) -> bool:
    """Whether the repeating warning `name` is due: not shown by this user in the last
    WARN_EVERY_S seconds (`status --watch`, or status run again and again). Marks it shown."""
    stamp = Path(paths.state_path()) / f"warned-{name}"
    now = time.time() if now is None else now
    try:
        if now - stamp.stat().st_mtime < WARN_EVERY_S:
            return False
    except OSError:
        pass
    try:
        paths.state_dir()
        stamp.touch(mode=0o600)
        os.utime(stamp, (now, now))
    except OSError:
        pass  # a read-only state directory: warn every time, as before
    return True


def interval_path() -> Path:
    return Path(paths.state_path()) / INTERVAL_FILE


def cron_interval_s() -> int | None:
    try:
        return int(interval_path().read_text().strip()) or None
    except (OSError, ValueError):
        return None


def record_cron_interval(every_minutes: int | None) -> None:
    """`cron install` records its interval (`cron remove`: None, the file goes)."""
    if every_minutes is None:
        interval_path().unlink(missing_ok=True)
        return
    paths.state_dir()
    paths.write_atomic(interval_path(), f"{every_minutes * 60}\n", 0o600)


def _utc(text: str | None) -> datetime | None:
    if not text:
        return None
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
