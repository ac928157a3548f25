"""The tick's bulk write of observations: every change lands on its attempt and, when a fact a rule
reads changed, in the replay history, field for field; on SQLite it commits without waiting for
fsync (rederivable), and the connection goes back to the pool at its own level, even when the
write fails; a tick that dies right after it repairs as before."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import CampaignctlError
from campaignctl.core.model.records import AttemptFacts, ObservedChange
from campaignctl.services.reconcile import reconcile
from tests.adapters.test_reconcile_fake_slurm import FAILURES, RETRIED, campaign, provoke
from tests.conftest import policy_decisions
from tests.crash import Crash
from tests.fakeslurm import FakeSlurm


def changes_for(store: Store, campaign_id: int) -> list[ObservedChange]:
    rows = store.history(campaign_id)
    return [
        ObservedChange(rows[0].id, AttemptFacts("FAILED", "FAILED", 1, "node7", 61, "2048K",
                                                "2026-11-24T01:02:03+00:00", None),
                       True, "billing=2,cpu=2,mem=1G,node=1", 183000),
        ObservedChange(rows[1].id, AttemptFacts("RUNNING", "RUNNING", None, "node8", 30, "1024K", None, None), True),
        # only the running clock moved: the attempt row changes, the replay history does not
        ObservedChange(rows[2].id, AttemptFacts("SUBMITTED", "", None, "", 5, "12K", None,
                                                "2026-11-24T01:00:00+00:00"), False),
    ]


def test_bulk_write_round_trips_every_field(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 3)
    store = Store.open()
    record = store.campaign("rc")
    assert record is not None
    tick = DecisionLog(store.engine).begin_tick("rc")
    changes = changes_for(store, record.id)
    store.record_observations(tick, changes)

    after = {r.id: r for r in store.history(record.id)}
    for c in changes:
        assert after[c.attempt_id].facts == c.facts
    with store.engine.connect() as conn:
        tres = dict(conn.execute(sa.text("SELECT id, alloc_tres FROM attempts")).all())
        energy = dict(conn.execute(sa.text("SELECT id, consumed_energy_j FROM attempts")).all())
        kept = conn.execute(sa.text(
            "SELECT attempt_id, tick_id, state, slurm_state, exit_code, nodes, elapsed_s, max_rss, ended_at, "
            "missing_since FROM observations ORDER BY id")).all()
    assert tres[changes[0].attempt_id] == "billing=2,cpu=2,mem=1G,node=1"
    assert tres[changes[1].attempt_id] == ""  # no AllocTRES seen: what was stored stays
    assert (energy[changes[0].attempt_id], energy[changes[1].attempt_id]) == (183000, None)
    assert [tuple(r) for r in kept] == [
        (c.attempt_id, tick, *c.facts) for c in changes[:2]]


@pytest.mark.sqlite_only(reason="SQLite's synchronous level per connection")
def test_observations_commit_unsynced_and_the_connection_goes_back_at_its_level(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 3)
    store = Store.open()
    record = store.campaign("rc")
    assert record is not None
    statements: list[str] = []

    @sa.event.listens_for(store.engine, "connect")
    def trace(dbapi_conn: object, _record: object) -> None:
        dbapi_conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]

    store.engine.dispose()  # the next connection is a new one, traced
    tick = DecisionLog(store.engine).begin_tick("rc")
    store.record_observations(tick, changes_for(store, record.id))
    written: list[str] = []
    for s in statements:  # the trace has one line per row of an executemany: one per statement here
        if s.startswith(("PRAGMA synchronous", "UPDATE attempts", "INSERT INTO observations", "COMMIT")):
            s = s if s.startswith("PRAGMA") else s.split()[0]
            written += [s] if written[-1:] != [s] else []
    assert written[-6:] == ["PRAGMA synchronous", "PRAGMA synchronous=NORMAL", "UPDATE", "INSERT", "COMMIT",
                            "PRAGMA synchronous=2"]

    bad = [ObservedChange(10**9, AttemptFacts("FAILED", "FAILED", 1, "n", 1), True)]  # no such attempt
    with pytest.raises(CampaignctlError):  # the observation's foreign key: the whole write rolled back
        store.record_observations(tick, bad)
    assert statements[-1] == "PRAGMA synchronous=2"
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() == 2  # FULL: decisions still wait for fsync


def test_a_tick_killed_after_writing_observations_repairs_on_the_next(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    campaign(tmp_path, fake_slurm, 8)
    provoke(fake_slurm)
    written = Store.record_observations

    def then_die(self: Store, tick_id: int, changes: list[ObservedChange]) -> None:
        written(self, tick_id, changes)
        monkeypatch.setattr(Store, "record_observations", written)
        raise Crash("after the observations' commit, before any decision")

    monkeypatch.setattr(Store, "record_observations", then_die)
    with pytest.raises(Crash):
        reconcile("rc")
    store = Store.open()
    record = store.campaign("rc")
    assert record is not None
    assert policy_decisions(DecisionLog(store.engine).entries(record.id)) == []
    reconcile("rc")
    reconcile("rc")  # converges: nothing new
    attempts = store.attempts(record.id)
    per_task = Counter(a.task_index for a in attempts)
    assert {t for t, n in per_task.items() if n == 2} == RETRIED
    assert all(n <= 2 for n in per_task.values())
    entries = policy_decisions(DecisionLog(store.engine).entries(record.id))
    assert sorted(e.task_index for e in entries) == sorted(FAILURES)
    assert all(e.status == "applied" for e in entries)
