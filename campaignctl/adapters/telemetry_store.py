"""Per-attempt telemetry summaries and read positions, one row per attempt, updated in place."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence

import sqlalchemy as sa

from campaignctl.adapters.metrics_store import reads_behind
from campaignctl.adapters.store_engine import IN_LIMIT, driver_sql, in_parts, upsert, utc_now
from campaignctl.adapters.store_schema import attempts, tasks, telemetry
from campaignctl.adapters.telemetry_files import Position
from campaignctl.core.usage.telemetry import Summary, summary_from_dict, summary_to_dict

ONLY_MAX = IN_LIMIT  # tasks named in one query; more: the campaign's every task


class TelemetryStore:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def load(self, attempt_ids: Sequence[int]) -> dict[int, tuple[Position, Summary]]:
        out: dict[int, tuple[Position, Summary]] = {}
        with self.engine.connect() as conn:
            for part in in_parts(attempt_ids):
                rows = conn.execute(sa.select(telemetry).where(telemetry.c.attempt_id.in_(part))).all()
                out.update({r.attempt_id: (Position(r.inode, r.file_offset, bool(r.behind)),
                                           summary_from_dict(json.loads(r.summary_json))) for r in rows})
        return out

    def save(self, updates: Iterable[tuple[int, Position, Summary]]) -> None:
        saved = list(updates)
        if not saved:
            return
        rows = [{"attempt_id": i, "inode": p.inode, "file_offset": p.offset,
                 "summary_json": json.dumps(summary_to_dict(s)), "updated_at": utc_now(), "behind": int(p.behind)}
                for i, p, s in saved]
        with self.engine.begin() as conn:
            upsert(conn, telemetry, rows)
            # on the attempt row, where spend's GROUP BY reads it (store_migrations._021_SCREENS)
            conn.exec_driver_sql(driver_sql(conn, "UPDATE attempts SET gpu_energy_j = ? WHERE id = ?"),
                                 [(s.gpu_energy_j, i) for i, _, s in saved])

    def behind(self, campaign_id: int) -> dict[int, tuple[int, str]]:
        """Attempt id → (task index, token) of the campaign's attempts whose telemetry file still
        holds lines past the last read's cap."""
        return reads_behind(self.engine, telemetry, campaign_id)

    def by_task(self, campaign_id: int, only: Collection[int] | None = None) -> dict[int, Summary]:
        """The latest attempt's summary per task index (attempts without telemetry left out);
        `only`: those tasks (a screen's page), not the campaign's every task, when there are at
        most ONLY_MAX of them (one bound parameter each)."""
        query = (sa.select(tasks.c.task_index, attempts.c.attempt_number, telemetry.c.summary_json)
                 .join(attempts, attempts.c.id == telemetry.c.attempt_id)
                 .join(tasks, tasks.c.id == attempts.c.task_id)
                 .where(tasks.c.campaign_id == campaign_id)
                 .order_by(tasks.c.task_index, attempts.c.attempt_number))
        if only is not None and len(only) <= ONLY_MAX:
            query = query.where(tasks.c.task_index.in_(sorted(only)))
        with self.engine.connect() as conn:
            return {r.task_index: summary_from_dict(json.loads(r.summary_json)) for r in conn.execute(query)}
