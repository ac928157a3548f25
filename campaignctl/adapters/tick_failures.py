"""The `tick_failures` table (migration 016): a campaign whose part of a tick raised. `reconcile
--all` records it and goes on with the other campaigns; `status` shows it until a later tick of
that campaign finishes without one."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from campaignctl.adapters.store_engine import utc_now
from campaignctl.adapters.store_schema import tick_failures, ticks

ERROR_LIMIT = 2000  # characters of the error kept (an exception's text can quote a whole file)


@dataclass(frozen=True, slots=True)
class TickFailure:
    tick_id: int | None
    failed_at: str
    error: str


class TickFailures:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def record(self, tick_id: int | None, campaign_id: int, error: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(tick_failures.insert().values(tick_id=tick_id, campaign_id=campaign_id,
                                                       failed_at=utc_now(), error=error[:ERROR_LIMIT]))

    def current(self, campaign_id: int, name: str) -> TickFailure | None:
        """The campaign's failure in the last tick that covered it (`--all`, or its name), if it
        failed there; None once a later tick went through."""
        f, t = tick_failures.c, ticks.c
        last = sa.select(sa.func.max(t.id)).where(t.scope.in_(("--all", name)), t.finished_at.is_not(None))
        query = sa.select(f.tick_id, f.failed_at, f.error).where(
            f.campaign_id == campaign_id, f.tick_id >= last.scalar_subquery()).order_by(f.id.desc()).limit(1)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return TickFailure(row.tick_id, row.failed_at, row.error) if row else None
