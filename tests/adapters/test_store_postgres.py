"""The store on a real PostgreSQL server (scripts/pglab) as well as on SQLite: the faults issue 15
found on PostgreSQL 15. REAL is 4 bytes there (0.30000001 and 0.30000002 both read back as 0.3, a
Unix time rounded to 128 s), INTEGER 4 bytes (a 64-bit inode failed every tick), two users' first
commands at once raced the migrations (exit 1 in 10 of 10 tries), and database errors (missing
grants, a lock timeout, a lost server) surfaced as 'internal error', exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters import store_engine as store_module
from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_migrations import MIGRATIONS
from campaignctl.adapters.telemetry_files import Position
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.core.model.training_metrics import MetricPoint
from campaignctl.core.usage.telemetry import Summary
from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, pg_admin_engine, run_main, write_spec
from tests.fakeslurm import FakeSlurm

SPEC = "name: pg\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1]}\n"
BIG_INODE = 2**40  # XFS and Lustre hand out inode numbers past 2**32
BIG_OFFSET = 2**33  # a metrics.jsonl past 4 GiB


def attempt_ids(store: Store) -> list[int]:
    campaign = store.campaign("pg")
    assert campaign is not None
    return [row.id for row in store.history(campaign.id)]


@pytest.fixture
def store(backend: str, tmp_path: Path, fake_slurm: FakeSlurm) -> Store:
    """A submitted campaign of two tasks (so attempts exist for the rows below) on `backend`."""
    submit(write_spec(tmp_path, SPEC))
    opened = Store.open()
    assert opened.engine.dialect.name == backend
    return opened


def test_metric_values_and_times_round_trip_as_doubles(store: Store) -> None:
    first, second = attempt_ids(store)
    t = 1_763_950_000.123456  # a Unix time with microseconds: a float4 rounds it to 128 s
    MetricsStore(store.engine).append([
        (first, Position(1, 10), 0, [MetricPoint(1, "loss", 0.30000001, t)]),
        (second, Position(2, 10), 0, [MetricPoint(1, "loss", 0.30000002, t + 1)])])
    campaign = store.campaign("pg")
    assert campaign is not None
    rows = MetricsStore(store.engine).rows(campaign.id, "loss")
    assert [(r[0], r[4], r[5]) for r in rows] == [(0, 0.30000001, t), (1, 0.30000002, t + 1)]


def test_a_64_bit_inode_and_offset_are_stored_for_metrics_and_telemetry(store: Store) -> None:
    first, second = attempt_ids(store)
    where = Position(BIG_INODE, BIG_OFFSET)
    MetricsStore(store.engine).append([(first, where, 0, [MetricPoint(2**40, "loss", 1.0)])])
    TelemetryStore(store.engine).save([(second, where, Summary())])
    assert MetricsStore(store.engine).positions([first]) == {first: (where, 0)}
    assert TelemetryStore(store.engine).load([second])[second][0] == where
    campaign = store.campaign("pg")
    assert campaign is not None
    assert MetricsStore(store.engine).rows(campaign.id)[0][2] == 2**40  # the step, too


# Each child imports everything first, says so, then waits for the starting gun, so that all ten
# open the new database within milliseconds of each other.
_CHILD = """
import os, sys, time
from campaignctl import cli
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.001)
sys.argv = ["campaignctl", "status"]
cli.main()
"""


def test_ten_processes_opening_a_new_database_at_once_all_succeed(backend: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    children = [subprocess.Popen([sys.executable, "-c", _CHILD, str(go)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=os.environ.copy()) for _ in range(10)]
    try:
        assert all(child.stdout and child.stdout.readline() == "ready\n" for child in children)
        go.touch()
        results = [(child.wait(timeout=COMMAND_TIMEOUT_S), *child.communicate()) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    failed = [(code, err) for code, _, err in results if code != 0]
    assert not failed, failed
    assert all("no campaigns yet" in out for _, out, _ in results)
    with Store.open().engine.connect() as conn:
        names = [r[0] for r in conn.exec_driver_sql("SELECT name FROM schema_migrations ORDER BY name")]
    assert names == sorted(name for name, _ in MIGRATIONS)


def test_a_role_without_grants_gets_exit_73_with_the_grant_to_run_and_then_works(
        stranger: tuple[str, sa.Engine], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    url, owner = stranger
    Store.open()  # the owner role migrates
    monkeypatch.setenv("CAMPAIGNCTL_DB_URL", url)
    code, _, err = run_main(monkeypatch, capsys, "status")
    assert code == 73, err
    assert "permission denied" in err and "internal error" not in err
    grants = " ".join(err.split("hint: ")[1].split())
    assert "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO r_" in grants
    assert "REVOKE UPDATE, DELETE ON decisions, decision_outcomes FROM r_" in grants
    with owner.connect() as conn:  # what the hint says, run by the owner
        for statement in grants.split("by running: ")[1].split("; "):
            conn.exec_driver_sql(statement)
    code, out, err = run_main(monkeypatch, capsys, "status")
    assert code == 0, err
    assert "no campaigns yet" in out


def test_a_role_that_may_not_create_tables_meeting_a_new_database_gets_exit_73_naming_the_owner(
        stranger: tuple[str, sa.Engine], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = stranger
    monkeypatch.setenv("CAMPAIGNCTL_DB_URL", url)
    code, _, err = run_main(monkeypatch, capsys, "status")
    assert code == 73, err
    assert "permission denied for schema public" in err and "owner role" in err and "internal error" not in err


def test_a_lock_timeout_is_exit_75(pg_url: str, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    Store.open()
    holder = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    monkeypatch.setenv("CAMPAIGNCTL_DB_URL", f"{pg_url}?options=-c%20lock_timeout%3D300")
    with holder.begin() as conn:
        conn.exec_driver_sql("LOCK TABLE campaigns IN ACCESS EXCLUSIVE MODE")
        code, _, err = run_main(monkeypatch, capsys, "status")
    assert code == 75, err
    assert "lock timeout" in err and "run the command again" in err
    code, _, err = run_main(monkeypatch, capsys, "status")
    assert code == 0, err


def test_a_server_that_does_not_answer_is_exit_75_and_a_wrong_password_73(
        pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    url = sa.make_url(pg_url)
    monkeypatch.setenv("CAMPAIGNCTL_DB_URL", url.set(port=1).render_as_string(hide_password=False))
    code, _, err = run_main(monkeypatch, capsys, "status")
    assert code == 75, err
    assert "no connection to the database" in err and "hint: " in err and str(url.password) not in err
    monkeypatch.setenv("CAMPAIGNCTL_DB_URL", url.set(password="wrong").render_as_string(hide_password=False))
    code, _, err = run_main(monkeypatch, capsys, "status")
    assert code == 73, err
    assert "password authentication failed" in err and "CAMPAIGNCTL_DB_URL" in err


def test_a_connection_killed_by_the_server_is_exit_75(pg_url: str, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The server ends this process's session between two statements (an administrator's
    pg_terminate_backend, as a restart or failover would): the next statement fails."""
    store = Store.open()
    with store.engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with pg_admin_engine().connect() as admin:
            admin.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")
        with pytest.raises(Exception) as raised:
            conn.exec_driver_sql("SELECT 1")
    assert getattr(raised.value, "exit_code", None) == 75, raised.value


def test_migration_010_widens_a_database_written_before_it_and_keeps_its_rows(
        pg_url: str, tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    before = [m for m in MIGRATIONS if m[0] != "010_wide_numbers"]
    monkeypatch.setattr(store_module, "MIGRATIONS", before)
    submit(write_spec(tmp_path, SPEC))
    old = Store.open()
    first, _ = attempt_ids(old)
    MetricsStore(old.engine).append([(first, Position(7, 10), 0, [MetricPoint(3, "loss", 0.5, 1.5)])])
    old.engine.dispose()
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS)
    new = Store.open()
    with new.engine.connect() as conn:
        kinds = dict(conn.exec_driver_sql(
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
            "WHERE table_name IN ('metrics', 'metric_reads', 'telemetry')").all())
    assert kinds["metrics.value"] == kinds["metrics.t"] == "double precision"
    assert kinds["metric_reads.inode"] == kinds["telemetry.inode"] == kinds["metrics.step"] == "bigint"
    campaign = new.campaign("pg")
    assert campaign is not None
    assert [r[2:] for r in MetricsStore(new.engine).rows(campaign.id)] == [(3, "loss", 0.5, 1.5)]
    assert MetricsStore(new.engine).positions([first]) == {first: (Position(7, 10), 0)}
