"""Read-only queries for the report and the Prometheus export: attempt times, when each state was
first observed, and the last finished reconcile tick."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from campaignctl.adapters.store_engine import IN_LIMIT, driver_sql


@dataclass(frozen=True, slots=True)
class AttemptTimes:
    id: int
    task_index: int
    attempt_number: int
    token: str
    state: str
    created_at: str  # UTC with its offset (the store's clock)
    ended_at: str | None  # sacct End: UTC with its offset (rows from before: naive local, core/base/clock.py)
    elapsed_s: int | None
    resources_json: str  # effective: the attempt's own after an in-place resize, else its submission's
    alloc_tres: str
    max_rss: str  # sacct MaxRSS of its largest step ('' if none reported)
    consumed_energy_j: int | None  # sacct ConsumedEnergyRaw (None where the site accounts no energy)
    nodes: str = ""  # sacct NodeList: `node[1-2]` for a multi-node attempt
    job_id: str | None = None  # its array element, `12_3`
    packed: bool = False  # it shares its element with other tasks (core/pack_plan.py)


_ATTEMPTS_SQL = """
SELECT a.id, t.task_index, a.attempt_number, a.token, a.state, a.created_at, a.ended_at, a.elapsed_s,
       COALESCE(a.resources_json, s.resources_json), a.alloc_tres, a.max_rss, a.consumed_energy_j, a.nodes,
       a.job_id, s.pack != ''
FROM attempts a JOIN tasks t ON t.id = a.task_id JOIN submissions s ON s.id = a.submission_id
WHERE t.campaign_id = ?{only} ORDER BY t.task_index, a.attempt_number"""

_FIRST_SEEN_SQL = """
SELECT o.attempt_id, o.state, MIN(o.observed_at)
FROM observations o JOIN attempts a ON a.id = o.attempt_id JOIN tasks t ON t.id = a.task_id
WHERE t.campaign_id = ? GROUP BY o.attempt_id, o.state"""

_DECISION_COUNTS_SQL = ("SELECT rule, action, mode, COUNT(*) FROM decisions WHERE campaign_id = ? "
                        "GROUP BY rule, action, mode")

# a tick that observed nothing (Slurm down) or is still running says nothing about freshness
_LAST_TICK_SQL = "SELECT MAX(finished_at) FROM ticks WHERE status IN ('ok', 'nothing-to-do')"


class ReportQueries:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def attempts(self, campaign_id: int, only: Collection[int] | None = None) -> list[AttemptTimes]:
        """Every attempt of the campaign, by task then attempt number; `only`: those tasks' (a
        screen's page), when there are at most IN_LIMIT of them (one bound parameter each)."""
        named = sorted(only) if only is not None and len(only) <= IN_LIMIT else None
        if named == []:
            return []
        listed = "" if named is None else f" AND t.task_index IN ({', '.join('?' * len(named))})"
        sql = _ATTEMPTS_SQL.format(only=listed)
        # rows one at a time, repeated strings shared (one object per distinct value): a
        # 1,000,000-attempt campaign's rows all held, each with its own copies, took 2.5 GB
        share: Callable[[Any, Any], Any] = {}.setdefault
        with self.engine.connect() as conn:
            return [AttemptTimes(i, task, number, token, share(state, state), share(created, created),
                                 share(ended, ended), elapsed, share(res, res), share(tres, tres), share(rss, rss),
                                 energy, share(nodes, nodes), job, bool(packed))
                    for i, task, number, token, state, created, ended, elapsed, res, tres, rss, energy, nodes, job,
                    packed in conn.exec_driver_sql(driver_sql(conn, sql), (campaign_id, *(named or ())))]

    def first_seen(self, campaign_id: int) -> dict[int, dict[str, str]]:
        """Attempt id → state → when a tick first recorded it (UTC with offset)."""
        out: dict[int, dict[str, str]] = {}
        with self.engine.connect() as conn:
            for attempt_id, state, at in conn.exec_driver_sql(driver_sql(conn, _FIRST_SEEN_SQL), (campaign_id,)):
                out.setdefault(attempt_id, {})[state] = at
        return out

    def decision_counts(self, campaign_id: int) -> dict[tuple[str, str, str], int]:
        """(rule, action, mode) → decisions: one GROUP BY however long the log."""
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(driver_sql(conn, _DECISION_COUNTS_SQL), (campaign_id,)).fetchall()
        return {(r[0], r[1], r[2]): int(r[3]) for r in rows}

    def last_tick_at(self) -> str | None:
        """When the last reconcile tick that observed Slurm finished (UTC with offset)."""
        with self.engine.connect() as conn:
            value = conn.exec_driver_sql(_LAST_TICK_SQL).scalar()
        return None if value is None else str(value)
