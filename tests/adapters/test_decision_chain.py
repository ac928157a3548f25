"""The chain in the store: migration 006 chains a log written before it, the writer keeps
chaining from there, and a tick of 10,000 decisions is still one pass and one executemany."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from campaignctl.adapters import store_engine as store_module
from campaignctl.adapters.decision_chain import stored_rows
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import IntegrityError
from campaignctl.core.decisions.action_records import GiveUp, ResizePending
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.governance.chain import verify_chain
from campaignctl.core.policy.policy import Policy

BEFORE_CHAIN = [name for name, _ in store_module.MIGRATIONS].index("006_decision_chain")


def verified(store: Store, chain: str) -> tuple[bool, int, str]:
    with stored_rows(store.engine, chain) as rows:
        report = verify_chain(chain, rows)
    return report.ok, report.rows, report.problem


def seed_unchained(store: Store, decisions: int, outcomes: int) -> None:
    """Rows the way campaignctl wrote them before 006: no hashes (the columns' default '')."""
    with store.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO campaigns VALUES (1, 'old', 'active', 1, '/r', 'me', '2024-01-01')"))
        conn.execute(sa.text("INSERT INTO ticks (id, started_at, status, scope) VALUES (1, '2024-01-01', 'ok', 'old')"))
        if not decisions:
            return
        conn.execute(sa.text(
            "INSERT INTO decisions (tick_id, campaign_id, task_index, attempt_token, policy, policy_digest, rule, "
            "action, params_json, inputs_json, reason, mode, group_token, created_at) VALUES "
            "(1, 1, :i, :token, 'default@v1', 'abc', 'failed', 'give_up', '{}', '{\"exit_code\": 1}', "
            "'a bug: exit 1', 'enforce', '', '2024-01-01T00:00:00+00:00')"),
            [{"i": i, "token": f"t.{i}"} for i in range(decisions)])
        conn.execute(sa.text(
            "INSERT INTO decision_outcomes (decision_id, status, detail_json, error, created_at) "
            "VALUES (:d, 'applied', '{}', '', '2024-01-01T00:00:01+00:00')"),
            [{"d": d} for d in range(1, outcomes + 1)])


def test_migration_006_chains_a_log_written_before_it_and_keeps_it_append_only(
        state_home: object, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as before:
        before.setattr(store_module, "MIGRATIONS", store_module.MIGRATIONS[:BEFORE_CHAIN])
        store = Store.open()
        seed_unchained(store, decisions=7, outcomes=5)
    assert verified(store, "decision") == (False, 0, "decision #1 has no hash (written without the chain, "
                                                     "e.g. by an older campaignctl)")

    assert store.migrate() == [name for name, _ in store_module.MIGRATIONS[BEFORE_CHAIN:]]  # 006 and later
    assert verified(store, "decision") == (True, 7, "")
    assert verified(store, "outcome") == (True, 5, "")
    for sql in ("UPDATE decisions SET reason = 'x' WHERE id = 1", "DELETE FROM decision_outcomes WHERE id = 1"):
        with pytest.raises(IntegrityError, match="the decision log is append-only"), \
                store.engine.begin() as conn:
            conn.execute(sa.text(sql))

    DecisionLog(store.engine).write_outcomes([6, 7], "applied", {"note": "after the migration"})
    assert verified(store, "outcome") == (True, 7, "")  # the writer continues the backfilled chain


def test_a_tick_of_10000_decisions_is_chained_in_one_write(state_home: object) -> None:
    store = Store.open()
    seed_unchained(store, decisions=0, outcomes=0)
    planned = [(Decision(i, f"tok.{i}", "failed", "give_up" if i % 2 else "resize_pending", f"reason {i}",
                         {"exit_code": 1}, GiveUp() if i % 2 else ResizePending(),
                         mode="shadow" if i % 3 == 0 else "enforce"), "")
               for i in range(10_003)]
    log = DecisionLog(store.engine)
    ids = log.write_intents(1, 1, Policy(), planned[:10_000], [], revision=1)
    assert ids == list(range(1, 10_001))
    assert verified(store, "decision") == (True, 10_000, "")
    assert verified(store, "outcome")[:2] == (True, len(log.entries()) - len(log.entries(open_only=True)))
    again = log.write_intents(1, 1, Policy(), planned[10_000:], [], revision=1)
    assert again == [10_001, 10_002, 10_003] and verified(store, "decision")[:2] == (True, 10_003)
