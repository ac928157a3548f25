"""`campaignctl nodes` and `nodes forgive`: the ledger as a person reads it, and a clean slate
written with who gave it and why (the store's marks, made as a tick writes them)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import sqlalchemy as sa

from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import node_marks
from tests.cli.test_cli import assert_user_error, run_cli

CLUSTER = {"CAMPAIGNCTL_CLUSTER": "lab"}


def ledger(state: Path) -> dict[str, dict]:
    shown = run_cli("nodes", "--json", state=state, env_extra=CLUSTER)
    assert shown.returncode == 0, shown.stderr
    return {n["node"]: n for n in json.loads(shown.stdout)["data"]["nodes"]}


def test_nodes_shows_the_ledger_and_forgive_wipes_a_slate_with_its_reason(state_home: Path) -> None:
    store = Store.open()
    at = (datetime.now(timezone.utc) - timedelta(minutes=5)).isoformat(timespec="seconds")
    with store.engine.begin() as conn:
        conn.execute(sa.insert(node_marks), [
            {"cluster": "lab", "node": "node3", "at": at, "kind": "hardware", "weight": 1.0, "campaign_id": None,
             "decision_id": None, "user_name": "alice", "reason": "node3 suspected (hardware): Xid 79"},
            {"cluster": "other", "node": "node9", "at": at, "kind": "node_fail", "weight": 1.0, "campaign_id": None,
             "decision_id": None, "user_name": "alice", "reason": "another cluster's"}])
    seen = ledger(state_home)
    assert list(seen) == ["node3"]  # the other cluster's ledger is its own
    assert (seen["node3"]["state"], seen["node3"]["evidence"]) == ("excluded", {"hardware": 1})
    table = run_cli("nodes", state=state_home, env_extra=CLUSTER)
    assert "node3" in table.stdout and "excluded" in table.stdout and "hardware" in table.stdout
    done = run_cli("nodes", "forgive", "node3", "--reason", "GPU replaced", state=state_home, env_extra=CLUSTER)
    assert done.returncode == 0 and "node3 forgiven on cluster lab" in done.stdout, done.stderr
    assert ledger(state_home) == {}
    with store.engine.connect() as conn:
        [(kind, reason, user)] = conn.execute(sa.select(node_marks.c.kind, node_marks.c.reason, node_marks.c.user_name)
                                              .where(node_marks.c.kind == "forgiven")).all()
    assert (kind, reason) == ("forgiven", "GPU replaced") and user
    assert_user_error(run_cli("nodes", "forgive", "node3;rm", state=state_home, env_extra=CLUSTER), 3,
                      "is not a node name")
