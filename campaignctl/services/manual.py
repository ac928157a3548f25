"""A step a person takes by hand (resume, approve, reject, rollback, marking a revision good)
is carried out like a tick's decisions: under the reconcile lock, so no tick races it, and in
a tick row of its own in the decision log."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from campaignctl.adapters.decision_chain import write_head_if_asked
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.lock import exclusive
from campaignctl.adapters.store import Store
from campaignctl.core.clock import UTC, stamp
from campaignctl.core.errors import SlurmTransientError


@contextmanager
def manual_tick(store: Store, scope: str) -> Iterator[tuple[DecisionLog, int]]:
    with exclusive("reconcile") as holder:
        if holder is not None:
            raise SlurmTransientError(f"a reconcile (pid {holder}) is running", "run the command again in a moment")
        log = DecisionLog(store.engine)
        tick_id = log.begin_tick(scope, stamp(datetime.now(UTC)))
        try:
            yield log, tick_id
        except BaseException:
            log.finish_tick(tick_id, "failed", 0, 0)
            raise
        log.finish_tick(tick_id, "ok", 0, 1)
        write_head_if_asked(store.engine)
