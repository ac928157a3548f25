"""A step a person takes by hand (resume, approve, reject, rollback, marking a revision good)
is carried out like a tick's decisions: under the reconcile lock and the campaign's lease, so no
tick (of any user, on any host) races it, and in a tick row of its own in the decision log."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import NamedTuple

from campaignctl.adapters.decision_chain import write_head_if_asked
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.lease import Leases
from campaignctl.adapters.lock import exclusive
from campaignctl.adapters.store import Store
from campaignctl.core.base.clock import UTC, stamp
from campaignctl.core.base.errors import LeaseHeldError, SlurmTransientError
from campaignctl.core.model.records import CampaignRecord
from campaignctl.services.dispatch import LeaseCheck


class ManualTick(NamedTuple):
    log: DecisionLog
    tick_id: int
    # whether this command still holds the campaign's lease: its Actor asks around each sbatch and
    # release, as a tick's does, so a command suspended past the TTL (a laptop lid, SIGSTOP inside
    # sbatch) never submits or releases what a tick that took the lapsed lease did meanwhile
    still_leased: LeaseCheck


@contextmanager
def manual_tick(store: Store, record: CampaignRecord, scope: str) -> Iterator[ManualTick]:
    with exclusive("reconcile") as holder:
        if holder is not None:
            raise SlurmTransientError(f"a reconcile (pid {holder}) is running", "run the command again in a moment")
        with acting_on(store, record) as leases:
            log = store.log
            tick_id = log.begin_tick(scope, stamp(datetime.now(UTC)))
            try:
                yield ManualTick(log, tick_id, lambda: leases.holds(record.id))
            except BaseException:
                log.finish_tick(tick_id, "failed", 0, 0)
                raise
            log.finish_tick(tick_id, "ok", 0, 1)
            write_head_if_asked(store.engine)


@contextmanager
def acting_on(store: Store, record: CampaignRecord) -> Iterator[Leases]:
    """Hold the campaign's lease for the block (renewed while it runs, released after it). Held by
    another process, of any user on any host: LeaseHeldError (75) naming the holder."""
    leases = Leases(store.engine)
    with leases.keep():
        held = leases.take([record.id])
        if record.id in held:
            holder = held[record.id]
            raise LeaseHeldError(f"campaign {record.name!r} is being acted on by {holder.describe()}",
                                 f"run the command again once it is done ({holder.lapses()})")
        yield leases
