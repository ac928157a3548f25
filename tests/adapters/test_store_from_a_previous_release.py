"""A store written by an earlier release reads and replays unchanged after this release's
migrations: the decision log's rows (their params as that release wrote them) decode, every
recorded decision the tick makes is reproduced by `policy replay`, and both hash chains verify.

The stores are tests/fixtures/stores/v2026-11-27.sql, v2026-11-29.sql and v2026-11-30.sql, recorded
by tests/fixtures/stores/record_store.py at the commits it names (four campaigns run against the
fake Slurm: cause rules with grouped sibling resizes, a budget hold and a forced release, an early
stop, rung promotions): the release before the typed decision vocabulary, the one before decisions
were typed on write, whose logs begin with each campaign's `start`, and the one before several
clusters (its submissions have no cluster: each is the one SLURM_CONF names)."""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.history_store import HistoryStore
from campaignctl.adapters.store import Store
from campaignctl.core.decisions.action_records import RECORDS
from campaignctl.core.governance.replay import actual_decisions, not_replayed, replay
from campaignctl.core.governance.replay_compare import compare
from campaignctl.services.campaigns import current_policy
from campaignctl.services.chain import verify_log

STORES = Path(__file__).resolve().parent.parent / "fixtures" / "stores"
# campaign → the (rule, action) of its enforced decisions, as that release logged them
LOGGED = {
    "rp": [("out_of_memory", "resubmit"), ("timeout", "resubmit"), ("preempted", "resubmit"),
           ("timeout", "resize_pending"), ("timeout", "resize_pending"), ("failed", "give_up"),
           ("timeout", "resubmit"), ("failed", "resubmit")],
    "tight": [("budget", "hold"), ("budget", "alert"), ("budget", "release")],
    "es": [("early_stopping", "stop")],
    "lad": [("promotion", "promote")] * 3 + [("promotion", "retire")] * 3 + [("promotion", "promote")]
           + [("promotion", "retire")] * 2,
}


# the release of 2026-11-29 started each campaign's first array by a decision of its tick
STARTED = {name: [("start", "start"), *logged] for name, logged in LOGGED.items()}
RELEASES = {"v2026-11-27": LOGGED, "v2026-11-29": STARTED, "v2026-11-30": STARTED}


@pytest.fixture(params=sorted(RELEASES))
def release(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def old_store(state_home: Path, release: str) -> Store:
    db = state_home / "campaignctl" / "campaignctl.db"
    db.parent.mkdir(parents=True, mode=0o700)
    with sqlite3.connect(db) as conn:
        conn.executescript((STORES / f"{release}.sql").read_text())
    return Store.open()  # this release's migrations run here


@pytest.mark.sqlite_only(reason="the recorded store is a SQLite database, as that release wrote it")
def test_the_previous_release_s_log_reads_replays_and_verifies(old_store: Store, release: str) -> None:
    log, histories = DecisionLog(old_store.engine), HistoryStore(old_store.engine)
    expected = RELEASES[release]
    for name, logged in expected.items():
        record = old_store.campaign(name)
        assert record is not None
        entries = [e for e in log.entries(record.id) if e.mode == "enforce"]
        assert [(e.rule, e.action) for e in entries] == logged
        for e in entries:  # every key that release wrote is a field of the action's typed record
            record_type = RECORDS[e.action]
            assert isinstance(e.typed, record_type)
            assert set(e.params) <= {f.name for f in fields(record_type)}, (e.action, e.params)
        history = histories.campaign_history(record)
        policy = current_policy(old_store, record)[0]
        actual = actual_decisions(history)
        comparison = compare(actual, replay(history, policy), policy.prices, lambda _d: None, {})
        assert comparison.differences == (), name
        assert comparison.reproduced == len(actual) > 0, name
        assert set(not_replayed(history)) <= {"release"}  # a person's resume: not a tick's
    verified = verify_log()
    assert verified.ok, verified.problems
    assert verified.decisions.rows == sum(map(len, expected.values())) - 1  # rp: 5 and 6 resized in one row
