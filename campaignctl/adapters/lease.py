"""A campaign's lease: the one lock on a campaign that every host and user sees, a row in the
database naming its holder (user, host, pid) and when it lapses.

The reconcile `flock` (adapters/lock.py) is per state directory and host: two users, a crontab on
two login nodes, or two shells with different XDG_STATE_HOME on one database each held "the"
lock, and both acted on the same campaign (issue 15: one failure retried twice in 13 of 30
rounds); flock over NFS is not to be trusted either. A lease is taken (or kept), renewed and
released by one statement each, so two takers never both win. Expiry is judged by the database's
clock, never a login node's (their clocks differ): a holder that crashed, or whose host died,
loses the lease once it lapses, with nothing to clean up. SQLite has no server: its clock is the
clock of the host running the command (the same for every user of that host). A holder on this
host, in this PID namespace, whose process is gone (killed right after sbatch, say) gives its
leases up at once; in another namespace (a container) its pid means nothing here, so it lapses.

One process holds all its leases under one random token: they are renewed together, in the
background, while a tick runs (`keep`), and released together when it ends.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from campaignctl.adapters import identity
from campaignctl.adapters.store_schema import leases
from campaignctl.core.base.errors import CampaignctlError, UsageError
from campaignctl.core.base.units import parse_interval_seconds
from campaignctl.core.screens.stall import human

TTL_SETTING = "CAMPAIGNCTL_LEASE_TTL"
# A lapsed lease is free to take: this is how long a crashed holder blocks its campaigns. A live
# holder renews every TTL/3 whatever it is doing (a tick waiting 120 s on sbatch included), so the
# TTL need not cover a tick's worst case, only a renewal's delay (a database busy for 15 s).
DEFAULT_TTL_S = 300
MIN_TTL_S = 30
# Seconds since the epoch by the database's clock: PostgreSQL's statement start (one value for the
# whole statement), SQLite's 'now' (fixed within one statement too, milliseconds).
_NOW = {"postgresql": "EXTRACT(EPOCH FROM statement_timestamp())::double precision",
        "sqlite": "((julianday('now') - 2440587.5) * 86400.0)"}


def _clock() -> float:
    """Seconds that pass as the database's do, a suspended host's included (CLOCK_BOOTTIME, Linux;
    CLOCK_MONOTONIC stops while the machine sleeps, and the wall clock jumps when it is set)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _pid_namespace() -> str:
    """`pid:[4026531836]`: which pids this process sees (a container has its own); '' unknown."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (signal 0 checks, sends nothing; EPERM:
    it exists, owned by another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


@dataclass(frozen=True, slots=True)
class Holder:
    user: str
    host: str
    pid: int
    since: datetime  # UTC, by the database's clock
    expires_in_s: int  # by the database's clock, unless renewed

    def describe(self) -> str:
        """`alice@login2 pid 4242 since 2026-11-24T05:40:03Z`."""
        return f"{self.user}@{self.host} pid {self.pid} since {self.since:%Y-%m-%dT%H:%M:%SZ}"

    def lapses(self) -> str:
        return f"its lease lapses in {human(self.expires_in_s)} unless renewed"

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "since": self.since.isoformat(timespec="seconds")}


def ttl_setting() -> int:
    """CAMPAIGNCTL_LEASE_TTL (`300`, `90s`, `10m`), at least MIN_TTL_S; DEFAULT_TTL_S unset."""
    text = os.environ.get(TTL_SETTING, "").strip()
    if not text:
        return DEFAULT_TTL_S
    seconds = parse_interval_seconds(text)
    if seconds is None or seconds < MIN_TTL_S:
        raise UsageError(f"{TTL_SETTING}={text!r} is not a duration of at least {MIN_TTL_S}s",
                         f"give seconds or 90s, 10m; unset it for the default ({human(DEFAULT_TTL_S)})")
    return seconds


class Leases:
    """The leases this process holds on campaigns of one database, under one token."""

    def __init__(self, engine: sa.Engine, ttl_s: int | None = None) -> None:
        self.engine = engine
        self.ttl_s = ttl_setting() if ttl_s is None else ttl_s
        self.token = uuid.uuid4().hex
        self.user, self.host, self.pid = identity.user_name(), socket.gethostname(), os.getpid()
        self.pid_ns = _pid_namespace()
        self._now: sa.ColumnClause[float] = sa.literal_column(_NOW[engine.dialect.name])
        self._fresh: dict[int, float] = {}  # campaign → `_clock()` when its lease was last extended

    def take(self, campaign_ids: Iterable[int]) -> dict[int, Holder]:
        """Take the lease of each campaign that is free, lapsed or already ours (then renewed);
        returns the holder of each one another holds. One statement decides: INSERT … ON CONFLICT
        DO UPDATE … WHERE lapsed or ours. The holders are read in the same transaction: PostgreSQL
        locks a conflicting row even when the WHERE refuses the update (INSERT, "ON CONFLICT
        Clause"), SQLite holds its write lock, so what is read is who refused us."""
        ids = list(dict.fromkeys(campaign_ids))
        if not ids:
            return {}
        insert = (postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert)(leases)
        now, mine = self._now, leases.c.token == insert.excluded.token
        statement = insert.values([self._row(i) for i in ids]).on_conflict_do_update(
            index_elements=[leases.c.campaign_id],
            set_={"holder": insert.excluded.holder, "host": insert.excluded.host, "pid": insert.excluded.pid,
                  "pid_ns": insert.excluded.pid_ns,
                  "token": insert.excluded.token, "expires_at": insert.excluded.expires_at,
                  "acquired_at": sa.case((mine, leases.c.acquired_at), else_=insert.excluded.acquired_at)},
            where=sa.or_(leases.c.expires_at <= now, mine)).returning(leases.c.campaign_id)
        asked = _clock()
        with self.engine.begin() as conn:
            taken = set(conn.execute(statement).scalars())
            taken |= self._take_from_the_dead(conn, [i for i in ids if i not in taken])
            self._extended(taken, asked)
            return self._holders(conn, [i for i in ids if i not in taken])

    def _take_from_the_dead(self, conn: sa.Connection, ids: list[int]) -> set[int]:
        """Leases held by a process of this host that no longer exists (killed, crashed: the
        flock it held died with it, its lease would block the campaign for up to a TTL). Taken
        over by token, so a holder that renewed in between keeps it. A pid is only known dead on
        its own host: a holder elsewhere lapses by the clock."""
        if not ids or not self.pid_ns:
            return set()
        rows = conn.execute(sa.select(leases.c.campaign_id, leases.c.token, leases.c.pid).where(
            leases.c.campaign_id.in_(ids), leases.c.host == self.host, leases.c.pid_ns == self.pid_ns)).all()
        taken = set()
        for row in rows:
            if _alive(row.pid):
                continue
            swap = (leases.update().where(leases.c.campaign_id == row.campaign_id, leases.c.token == row.token)
                    .values(self._row(row.campaign_id)).returning(leases.c.campaign_id))
            taken |= set(conn.execute(swap).scalars())
        return taken

    def holds(self, campaign_id: int) -> bool:
        """Still ours? False once another took it after it lapsed (a holder suspended past its
        TTL): acting then could repeat what the other did. Asks the database (and renews it) only
        when half a TTL has passed since it was last taken or renewed: until it lapses, which is
        a TTL after that statement was sent at the earliest, nobody else can take it."""
        if _clock() - self._fresh.get(campaign_id, -math.inf) < self.ttl_s / 2:
            return True
        asked = _clock()
        statement = (leases.update().where(leases.c.campaign_id == campaign_id, leases.c.token == self.token)
                     .values(expires_at=self._now + self.ttl_s).returning(leases.c.campaign_id))
        with self.engine.begin() as conn:
            held = set(conn.execute(statement).scalars())
        self._extended(held, asked)
        return campaign_id in held

    def renew(self) -> set[int]:
        """Push back the expiry of every lease this process still holds; returns their campaigns."""
        asked = _clock()
        statement = (leases.update().where(leases.c.token == self.token)
                     .values(expires_at=self._now + self.ttl_s).returning(leases.c.campaign_id))
        with self.engine.begin() as conn:
            held = set(conn.execute(statement).scalars())
        self._extended(held, asked)
        return held

    def release(self) -> None:
        self._fresh.clear()
        with self.engine.begin() as conn:
            conn.execute(leases.delete().where(leases.c.token == self.token))

    def _extended(self, campaign_ids: set[int], asked: float) -> None:
        """`asked`: `_clock()` before the statement that extended them (renewals run in
        the background thread: one dict update each, atomic)."""
        self._fresh.update(dict.fromkeys(campaign_ids, asked))

    @contextmanager
    def keep(self) -> Iterator[Leases]:
        """Renew every TTL/3 in a background thread while the block runs; release at its end (a
        release the database refuses is left to lapse)."""
        stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(stop,), name="campaignctl-lease", daemon=True)
        beat.start()
        try:
            yield self
        finally:
            stop.set()
            beat.join()
            with contextlib.suppress(CampaignctlError):  # the database is gone or busy: they lapse
                self.release()

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self.ttl_s / 3):
            with contextlib.suppress(CampaignctlError):  # busy or unreachable: `holds` tells the tick
                self.renew()

    def _row(self, campaign_id: int) -> dict[str, object]:
        return {"campaign_id": campaign_id, "holder": self.user, "host": self.host, "pid": self.pid,
                "pid_ns": self.pid_ns, "token": self.token, "acquired_at": self._now,
                "expires_at": self._now + self.ttl_s}

    def _holders(self, conn: sa.Connection, ids: list[int]) -> dict[int, Holder]:
        if not ids:
            return {}
        rows = conn.execute(sa.select(leases, self._now.label("now")).where(leases.c.campaign_id.in_(ids))).all()
        return {r.campaign_id: Holder(r.holder, r.host, r.pid, datetime.fromtimestamp(r.acquired_at, timezone.utc),
                                      round(r.expires_at - r.now)) for r in rows}
