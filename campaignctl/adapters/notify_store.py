"""The `notifications` table (migration 014): one row per (event, channel), inserted once —
its key is unique — then `pending` until sent, or `failed` after a final answer or its last try."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from campaignctl.adapters.store_engine import utc_now
from campaignctl.adapters.store_schema import notifications
from campaignctl.core.screens.notify import Event

CHANNELS = ("webhook", "command")


@dataclass(frozen=True, slots=True)
class PendingNotice:
    id: int
    campaign_id: int
    channel: str
    event: dict[str, Any]  # Event.to_dict() as queued
    tries: int


@dataclass(frozen=True, slots=True)
class NoticeRow:
    event: str
    task: int | None
    decision_id: int | None
    channel: str
    status: str  # pending | sent | failed
    tries: int
    last_error: str  # masked when written
    created_at: str
    sent_at: str | None


class NotifyStore:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def known_keys(self, campaign_id: int) -> set[str]:
        """Event keys with a row on some channel: derived already, never queued again."""
        query = sa.select(notifications.c.event_key).where(notifications.c.campaign_id == campaign_id)
        with self.engine.connect() as conn:
            return {key.rsplit("@", 1)[0] for key in conn.execute(query).scalars()}

    def enqueue(self, campaign_id: int, events: Sequence[Event], channels: Sequence[str]) -> int:
        """Queue each event on each channel; a key queued already (by another process) is left alone."""
        now = utc_now()
        rows = [{"campaign_id": campaign_id, "event_key": f"{e.key}@{channel}", "channel": channel,
                 "event_json": json.dumps(e.to_dict(), sort_keys=True), "status": "pending", "tries": 0,
                 "last_error": "", "created_at": now} for e in events for channel in channels]
        if not rows:
            return 0
        with self.engine.begin() as conn:
            insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(notifications)
            conn.execute(insert.on_conflict_do_nothing(index_elements=["event_key"]), rows)
        return len(rows)

    def pending(self, campaign_ids: Sequence[int] | None = None, due_by: str | None = None) -> list[PendingNotice]:
        """Notices still to send; with `due_by` (an ISO time), only those whose next try is due."""
        n = notifications.c
        query = sa.select(n.id, n.campaign_id, n.channel, n.event_json, n.tries).where(
            n.status == "pending").order_by(n.id)
        if due_by is not None:
            query = query.where(sa.or_(n.next_try_at.is_(None), n.next_try_at <= due_by))
        if campaign_ids is not None:
            query = query.where(n.campaign_id.in_(campaign_ids))
        with self.engine.connect() as conn:
            return [PendingNotice(r.id, r.campaign_id, r.channel, json.loads(r.event_json), r.tries)
                    for r in conn.execute(query)]

    def record(self, notice_id: int, status: str, tries: int, error: str, next_try_at: str | None = None) -> None:
        values: dict[str, object] = {"status": status, "tries": tries, "last_error": error,
                                     "next_try_at": next_try_at}
        if status == "sent":
            values["sent_at"] = utc_now()
        with self.engine.begin() as conn:
            conn.execute(notifications.update().where(notifications.c.id == notice_id).values(**values))

    def rows(self, campaign_id: int) -> list[NoticeRow]:
        n = notifications.c
        query = sa.select(n.event_json, n.channel, n.status, n.tries, n.last_error, n.created_at, n.sent_at).where(
            n.campaign_id == campaign_id).order_by(n.id)
        with self.engine.connect() as conn:
            found = conn.execute(query).all()
        return [NoticeRow(str(e["event"]), e.get("task"), e.get("decision_id"), r.channel, r.status, r.tries,
                          r.last_error, r.created_at, r.sent_at)
                for r in found for e in [json.loads(r.event_json)]]
