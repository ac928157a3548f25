"""A write the schema refuses, on SQLite and on the real PostgreSQL server, is an error of the
family with a documented exit code, never 'internal error' (exit 1, issue 15): a unique key another
writer took first is 75 (run again), naming the constraint; any other rule is 73."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import StateError, WriteConflictError

CAMPAIGN = ("INSERT INTO campaigns (name, state, current_revision, run_dir, owner, created_at) "
            "VALUES ('twice', 'active', 1, '/r', 'me', 'now')")


@pytest.fixture
def store(backend: str) -> Store:
    opened = Store.open()
    with opened.engine.begin() as conn:
        conn.exec_driver_sql(CAMPAIGN)
    return opened


def write(store: Store, sql: str) -> None:
    with store.engine.begin() as conn:
        conn.exec_driver_sql(sql)


def test_a_unique_key_taken_first_by_another_writer_is_75_naming_the_constraint(store: Store) -> None:
    with pytest.raises(WriteConflictError) as caught:
        write(store, CAMPAIGN)
    assert caught.value.exit_code == 75
    assert caught.value.constraint in ("campaigns_name_key", "campaigns.name")
    assert "at the same moment" in caught.value.message and "run it again" in caught.value.hint


@pytest.mark.parametrize("sql", [
    "INSERT INTO tasks (campaign_id, task_index, params_json, argv_json, env_json) VALUES (999, 0, '{}', '[]', '{}')",
    "INSERT INTO campaigns (name, state, current_revision, run_dir, owner, created_at) "
    "VALUES (NULL, 'active', 1, '/r', 'me', 'now')",
], ids=["foreign key", "not null"])
def test_any_other_rule_the_schema_enforces_is_73(store: Store, sql: str) -> None:
    with pytest.raises(StateError, match="refused a write") as caught:
        write(store, sql)
    assert caught.value.exit_code == 73
    with store.engine.connect() as conn:  # nothing of it was written
        assert conn.execute(sa.text("SELECT COUNT(*) FROM campaigns")).scalar_one() == 1
