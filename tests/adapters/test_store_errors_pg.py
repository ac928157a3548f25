"""PostgreSQL's errors as psycopg 3 raises them, mapped to the family's exit codes: 75 when the
next try may pass, 73 for a setup problem. The classes carry the server's SQLSTATE; the messages
without one are libpq's words for a failed connection, as psycopg 3.3 printed them against the
lab server (scripts/pglab) on a closed port, a wrong password and a missing database."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import errors as pg

from campaignctl.adapters.store_file import database_error, permission_error

REFUSED = ('connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused\n'
           "\tIs the server running on that host and accepting TCP/IP connections?")
BAD_PASSWORD = ('connection failed: connection to server at "127.0.0.1", port 15432 failed: FATAL:  '
                'password authentication failed for user "campaignctl_owner"')
NO_DATABASE = ('connection failed: connection to server at "127.0.0.1", port 15432 failed: FATAL:  '
               'database "nosuch" does not exist')


@pytest.mark.parametrize(("exc", "code"), [
    (pg.SerializationFailure("could not serialize access due to concurrent update"), 75),
    (pg.DeadlockDetected("deadlock detected"), 75),
    (pg.LockNotAvailable("canceling statement due to lock timeout"), 75),
    (pg.QueryCanceled("canceling statement due to statement timeout"), 75),
    (pg.AdminShutdown("terminating connection due to administrator command"), 75),
    (pg.CannotConnectNow("the database system is starting up"), 75),
    (pg.TooManyConnections("sorry, too many clients already"), 75),
    (psycopg.OperationalError(REFUSED), 75),
    (psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"), 75),
    (psycopg.OperationalError(BAD_PASSWORD), 73),
    (psycopg.OperationalError(NO_DATABASE), 73),
    (pg.DiskFull("could not extend file: No space left on device"), 73),
    (pg.DataCorrupted("invalid page in block 0 of relation base/16384/16385"), 73),
    (pg.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), 73),
    (pg.NumericValueOutOfRange('value "1099511627776" is out of range for type integer'), 73),
])
def test_postgres_errors_map_to_75_when_a_retry_may_pass_and_73_otherwise(exc: Exception, code: int) -> None:
    error = database_error(exc, "postgresql+psycopg://u:***@127.0.0.1:15432/db")
    assert error.exit_code == code
    assert error.hint and str(exc).splitlines()[0] in error.message


@pytest.mark.parametrize(("text", "grant"), [
    ("permission denied for table schema_migrations", "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES"),
    ("permission denied for sequence campaigns_id_seq", "GRANT USAGE, SELECT ON ALL SEQUENCES"),
    ("permission denied for table decisions", "is append-only, so no role gets UPDATE or DELETE there"),
    ("permission denied for table attempts", "REVOKE UPDATE, DELETE ON decisions, decision_outcomes FROM"),
    ("permission denied for table ticks", "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE"),
    ("permission denied for schema public", "owner role"),
])
def test_a_missing_privilege_is_73_naming_what_to_grant_or_who_migrates(text: str, grant: str) -> None:
    error = permission_error(pg.InsufficientPrivilege(text), "db", "campaignctl_app")
    assert error.exit_code == 73
    assert grant in error.hint and "campaignctl_app" in error.hint


def test_another_sessions_table_lock_ends_a_tick_with_75_not_a_hang(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26: a `LOCK TABLE` held in another session's open transaction blocked a tick for as
    long as it was held; every session now has a lock_timeout (the busy timeout, here 2 s)."""
    from campaignctl.adapters import store_engine as store_module
    from tests.fakeslurm import FakeSlurm
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 2000)
    fake = FakeSlurm()
    from campaignctl.adapters import proc
    monkeypatch.setattr(proc, "EXECUTOR", fake)
    from campaignctl.services.submit import submit
    from tests.conftest import run_main, write_spec
    submit(write_spec(tmp_path, "name: lk\ncommand: [python3, t.py]\n"))
    blocker = sa.create_engine(pg_url)
    with blocker.connect() as conn:
        conn.exec_driver_sql("BEGIN")
        conn.exec_driver_sql("LOCK TABLE attempts IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        code, _, err = run_main(monkeypatch, capsys, "reconcile", "lk")
        took = time.monotonic() - started
        conn.exec_driver_sql("ROLLBACK")
    blocker.dispose()
    assert code == 75 and took < 90, (code, took, err)  # before: held until the lock was released
    assert "lock timeout" in err
