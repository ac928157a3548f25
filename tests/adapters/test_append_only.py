"""The decision log is append-only in the database itself, on SQLite (triggers since migration 002)
and on PostgreSQL (triggers since 013, and an application role that holds no UPDATE or DELETE on
it): a change or a removal is refused whoever tries it, campaignctl says so (exit 65, not an
internal error), and `log verify` still passes on the log that was kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters.store import Store
from campaignctl.adapters.store_file import app_grants
from campaignctl.adapters.store_migrations import APPEND_ONLY_TABLES
from campaignctl.core.base.errors import CampaignctlError, StateError
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import run_main, write_spec
from tests.fakeslurm import FakeSlurm

SPEC = "name: ao\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1]}\n"
CHANGES = ["UPDATE decisions SET reason = 'rewritten' WHERE id = 1", "DELETE FROM decisions",
           "UPDATE decision_outcomes SET status = 'applied'", "DELETE FROM decision_outcomes WHERE id = 1"]


def logged_campaign(tmp_path: Path, fake: FakeSlurm) -> None:
    """A campaign whose task 1 failed with exit 1: its `start` and one `give_up` decision, and their
    outcomes, logged."""
    submit(write_spec(tmp_path, SPEC))
    fake.set_state(min(fake.jobs, key=int), 1, "FAILED", "1:0", "node1")
    [tick] = reconcile("ao").campaigns
    assert [(d.action, d.status) for d in tick.decisions] == [("give_up", "applied")]


def log_rows(engine: sa.Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for table in APPEND_ONLY_TABLES
                for row in conn.exec_driver_sql(f"SELECT * FROM {table} ORDER BY id")]


def refused_as_owner(sql: str, tmp_path: Path, fake: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    logged_campaign(tmp_path, fake)
    engine = Store.open().engine  # the owner of the tables: no privilege stops it, the triggers do
    before = log_rows(engine)
    with pytest.raises(CampaignctlError) as refused, engine.begin() as conn:
        conn.exec_driver_sql(sql)
    assert refused.value.exit_code == 65
    assert "refused to change the decision log: the decision log is append-only" in refused.value.message
    assert "log verify" in str(refused.value.hint)
    assert log_rows(engine) == before
    code, out, err = run_main(monkeypatch, capsys, "log", "verify")
    assert code == 0, err
    assert "decisions: 2 row(s) intact" in out and "outcomes: 2 row(s) intact" in out


@pytest.mark.parametrize("sql", CHANGES)
def test_the_database_refuses_to_change_the_decision_log_and_campaignctl_says_so(
        backend: str, sql: str, tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    refused_as_owner(sql, tmp_path, fake_slurm, monkeypatch, capsys)


@pytest.mark.parametrize("sql", ["TRUNCATE decisions, decision_outcomes", "TRUNCATE ticks CASCADE"])
def test_postgresql_refuses_to_truncate_the_decision_log(
        pg_url: str, sql: str, tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """TRUNCATE fires no DELETE trigger; SQLite has no TRUNCATE."""
    refused_as_owner(sql, tmp_path, fake_slurm, monkeypatch, capsys)


def test_the_application_role_may_append_to_the_log_but_the_server_refuses_it_any_change(
        stranger: tuple[str, sa.Engine], tmp_path: Path, fake_slurm: FakeSlurm,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's setup, in its order: on an empty database the owner gives the application role
    default privileges on what it will create, runs the migrations, and the role works."""
    url, owner = stranger
    role = sa.make_url(url).username
    with owner.connect() as conn:
        for statement in app_grants(str(role)):
            if statement.startswith("ALTER DEFAULT PRIVILEGES"):  # the rest needs the tables
                conn.exec_driver_sql(statement)
    Store.open()  # the owner role migrates
    monkeypatch.setenv("CAMPAIGNCTL_DB_URL", url)
    logged_campaign(tmp_path, fake_slurm)  # submit and reconcile as the application role
    with owner.connect() as conn:
        rights = {(table, verb): conn.execute(sa.text("SELECT has_table_privilege(:r, :t, :v)"),
                                              {"r": role, "t": table, "v": verb}).scalar_one()
                  for table in (*APPEND_ONLY_TABLES, "attempts") for verb in ("INSERT", "UPDATE", "DELETE")}
    assert rights == {(table, verb): table == "attempts" or verb == "INSERT"
                      for table, verb in rights}, rights

    engine = Store.open().engine
    before = log_rows(engine)
    for sql in CHANGES:
        with pytest.raises(StateError) as refused, engine.begin() as conn:
            conn.exec_driver_sql(sql)
        assert refused.value.exit_code == 73
        assert "permission denied for table decision" in refused.value.message
        assert "append-only" in str(refused.value.hint)
    assert log_rows(engine) == before
    code, _, err = run_main(monkeypatch, capsys, "log", "verify")
    assert code == 0, err
