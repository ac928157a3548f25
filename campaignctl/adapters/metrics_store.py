"""Ingested training metrics: points appended per attempt, and each file's read position."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from campaignctl.adapters.store_engine import in_parts, upsert, utc_now
from campaignctl.adapters.store_schema import attempts, metric_reads, metrics, tasks
from campaignctl.adapters.telemetry_files import Position
from campaignctl.core.model.training_metrics import Curve, MetricPoint, curves_by_task


def reads_behind(engine: sa.Engine, reads: sa.Table, campaign_id: int) -> dict[int, tuple[int, str]]:
    query = (sa.select(attempts.c.id, tasks.c.task_index, attempts.c.token)
             .join(reads, reads.c.attempt_id == attempts.c.id).join(tasks, tasks.c.id == attempts.c.task_id)
             .where(reads.c.behind != 0, tasks.c.campaign_id == campaign_id))
    with engine.connect() as conn:
        return {r.id: (r.task_index, r.token) for r in conn.execute(query)}


class MetricsStore:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def positions(self, attempt_ids: Sequence[int]) -> dict[int, tuple[Position, int]]:
        """Read position and bad-line count per attempt (missing: nothing read yet)."""
        out: dict[int, tuple[Position, int]] = {}
        with self.engine.connect() as conn:
            for part in in_parts(attempt_ids):
                rows = conn.execute(sa.select(metric_reads).where(
                    metric_reads.c.attempt_id.in_(part))).all()
                out.update({r.attempt_id: (Position(r.inode, r.file_offset, bool(r.behind)), r.bad_lines)
                            for r in rows})
        return out

    def behind(self, campaign_id: int) -> dict[int, tuple[int, str]]:
        """Attempt id → (task index, token) of the campaign's attempts whose metrics file still
        holds lines past the last read's cap."""
        return reads_behind(self.engine, metric_reads, campaign_id)

    def append(self, updates: Iterable[tuple[int, Position, int, Sequence[MetricPoint]]]) -> None:
        """New points and the position after them, in one transaction: a crash between the two
        would read the same lines twice."""
        updates = list(updates)
        if not updates:
            return
        now = utc_now()
        with self.engine.begin() as conn:
            upsert(conn, metric_reads, [
                {"attempt_id": i, "inode": p.inode, "file_offset": p.offset, "bad_lines": bad, "updated_at": now,
                 "behind": int(p.behind)}
                for i, p, bad, _ in updates])
            rows = [{"attempt_id": i, "step": m.step, "name": m.name, "value": m.value, "t": m.t}
                    for i, _, _, points in updates for m in points]
            if rows:
                conn.execute(metrics.insert(), rows)

    def rows(self, campaign_id: int, name: str | None = None) -> list[tuple[int, int, int, str, float, float | None]]:
        """(task index, attempt number, step, name, value, t) of the campaign, in report order
        (task, attempt, then as ingested), optionally of one metric only."""
        query = (sa.select(tasks.c.task_index, attempts.c.attempt_number, metrics.c.step, metrics.c.name,
                           metrics.c.value, metrics.c.t)
                 .join(attempts, attempts.c.id == metrics.c.attempt_id)
                 .join(tasks, tasks.c.id == attempts.c.task_id)
                 .where(tasks.c.campaign_id == campaign_id)
                 .order_by(tasks.c.task_index, attempts.c.attempt_number, metrics.c.id))
        if name is not None:
            query = query.where(metrics.c.name == name)
        with self.engine.connect() as conn:
            return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in conn.execute(query)]

    def completions(self, campaign_id: int, window: int) -> list[tuple[int, str, str, str, int, str, int]]:
        """(task index, token, nodes, ended_at, elapsed_s, params JSON, last step reported) of the
        campaign's `window` completed attempts that ended last (what the slow-node rule compares,
        core/nodes/evidence.py `latest`: ties by token; an attempt without an end time sorts
        first on both engines), by task and attempt."""
        completed = (attempts.c.state == "COMPLETED", tasks.c.campaign_id == campaign_id)
        ended = sa.func.coalesce(attempts.c.ended_at, "")
        chosen = (sa.select(attempts.c.id).join(tasks, tasks.c.id == attempts.c.task_id).where(*completed)
                  .order_by(ended.desc(), attempts.c.token.desc()).limit(window).subquery())
        last = (sa.select(metrics.c.attempt_id, sa.func.max(metrics.c.step).label("step"))
                .where(metrics.c.attempt_id.in_(sa.select(chosen.c.id)))
                .group_by(metrics.c.attempt_id).subquery())
        query = (sa.select(tasks.c.task_index, attempts.c.token, attempts.c.nodes, attempts.c.ended_at,
                           attempts.c.elapsed_s, attempts.c.params_json, last.c.step)
                 .join(tasks, tasks.c.id == attempts.c.task_id)
                 .join(chosen, chosen.c.id == attempts.c.id)
                 .outerjoin(last, last.c.attempt_id == attempts.c.id)
                 .order_by(tasks.c.task_index, attempts.c.attempt_number))
        with self.engine.connect() as conn:
            return [(r[0], r[1], r[2] or "", r[3] or "", r[4] or 0, r[5] or "{}", r[6] or 0)
                    for r in conn.execute(query)]

    def names_by_task(self, campaign_id: int) -> dict[int, set[str]]:
        """The metric names each task of the campaign reported (one DISTINCT query, not the points)."""
        query = (sa.select(tasks.c.task_index, metrics.c.name).distinct()
                 .join(attempts, attempts.c.id == metrics.c.attempt_id)
                 .join(tasks, tasks.c.id == attempts.c.task_id)
                 .where(tasks.c.campaign_id == campaign_id))
        out: dict[int, set[str]] = {}
        with self.engine.connect() as conn:
            for task, name in conn.execute(query):
                out.setdefault(task, set()).add(name)
        return out

    def curves(self, campaign_id: int, name: str) -> dict[int, Curve]:
        """The `name` curve of every task of the campaign (what promotion and early stopping read)."""
        return curves_by_task(((task, step, metric, value) for task, _, step, metric, value, _
                               in self.rows(campaign_id, name)), name)

