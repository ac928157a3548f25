"""The database failing after it was opened: locked by another process, full, damaged, from a
newer campaignctl, emptied, or in memory. Each is a user-facing error with a hint (75 for a lock
that may clear, 73 otherwise), never 'internal error', and nothing reaches Slurm."""

from __future__ import annotations

import gc
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters import store_engine as store_module
from campaignctl.adapters.store import Store
from campaignctl.services.submit import submit
from tests.conftest import run_main, write_spec
from tests.fakeslurm import FakeSlurm

SPEC = "name: st\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1, 2]}\n"


def database(state: Path) -> Path:
    return state / "campaignctl" / "campaignctl.db"


@pytest.fixture
def campaign(tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path) -> Path:
    """A submitted campaign (3 tasks, one array); returns its spec."""
    spec = write_spec(tmp_path, SPEC)
    submit(spec)
    return spec


@contextmanager
def write_locked(db: Path) -> Iterator[None]:
    """Another process (the stock sqlite3 tool) holds `BEGIN EXCLUSIVE` on `db` until the block ends."""
    binary = shutil.which("sqlite3")
    if binary is None:
        pytest.fail("the sqlite3 command-line tool is missing: `apt-get install sqlite3` (scripts/setup does)")
    holder = subprocess.Popen([binary, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdin and holder.stdout
    holder.stdin.write("BEGIN EXCLUSIVE;\nSELECT 'holding';\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "holding"
    try:
        yield
    finally:
        holder.stdin.write("ROLLBACK;\n.quit\n")
        holder.stdin.close()
        holder.wait(timeout=30)


def slurm_mutations(fake: FakeSlurm) -> int:
    return sum(n for name, n in fake.calls.items() if name in ("sbatch", "scontrol", "scancel"))


@pytest.mark.sqlite_only(reason="the sqlite3 tool holds the file's write lock; PostgreSQL's lock timeout: "
                                "test_store_postgres.py::test_a_lock_timeout_is_exit_75")
@pytest.mark.parametrize("command", ["reconcile", "submit"])
def test_a_write_locked_database_is_exit_75_with_a_hint_and_nothing_reaches_slurm(
        command: str, campaign: Path, fake_slurm: FakeSlurm, state_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 300)
    changed = write_spec(tmp_path, SPEC.replace("[0, 1, 2]", "[0, 1, 2, 3]"), name="changed.yaml")
    before = slurm_mutations(fake_slurm)
    args = ("reconcile", "st") if command == "reconcile" else ("submit", str(changed))
    with write_locked(database(state_home)):
        code, _, err = run_main(monkeypatch, capsys, *args)
    assert code == 75, err
    assert "database" in err and "locked" in err and "hint: " in err and "run it again" in err
    assert slurm_mutations(fake_slurm) == before
    code, _, err = run_main(monkeypatch, capsys, *args)  # the lock is gone: the same command goes through
    assert code == 0, err


@pytest.mark.sqlite_only(reason="SQLITE_FULL, provoked with PRAGMA max_page_count")
def test_a_full_disk_is_exit_73_with_a_hint(
        campaign: Path, fake_slurm: FakeSlurm, state_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """SQLite's SQLITE_FULL, provoked portably: the connection may not grow the file by a page."""
    create_engine = sa.create_engine

    def no_room(url: str) -> sa.Engine:
        engine = create_engine(url)

        @sa.event.listens_for(engine, "connect")
        def _cap(dbapi_conn: object, _record: object) -> None:
            pages = dbapi_conn.execute("PRAGMA page_count").fetchone()[0]  # type: ignore[attr-defined]
            dbapi_conn.execute(f"PRAGMA max_page_count = {pages}")  # type: ignore[attr-defined]

        return engine

    monkeypatch.setattr(store_module.sa, "create_engine", no_room)
    spec = write_spec(tmp_path, SPEC.replace("name: st", "name: big").replace("[0, 1, 2]", str(list(range(3000)))),
                      name="big.yaml")
    code, _, err = run_main(monkeypatch, capsys, "submit", str(spec))
    assert code == 73 and "full" in err and "hint: free space" in err, err


@pytest.mark.sqlite_only(reason="damages the SQLite file; PostgreSQL's DataCorrupted: test_store_errors_pg.py")
@pytest.mark.parametrize(("damage", "fragment"), [
    (lambda db: db.write_bytes(b"this is not a database, just text " * 200), "damaged"),
    (lambda db: db.write_bytes(db.read_bytes()[:5000]), "damaged"),
    (lambda db: db.write_bytes(b""), "empty (0 bytes)"),
], ids=["overwritten", "truncated", "emptied"])
def test_a_damaged_or_emptied_database_is_exit_73_not_a_fresh_start(
        damage: object, fragment: str, campaign: Path, fake_slurm: FakeSlurm, state_home: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    gc.collect()  # close this process's pooled connections: SQLite shares a WAL index per inode in a process
    db = database(state_home)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    damage(db)  # type: ignore[operator]
    before = slurm_mutations(fake_slurm)
    for args in (("status",), ("submit", str(campaign))):
        code, _, err = run_main(monkeypatch, capsys, *args)
        assert code == 73 and fragment in err and "hint: " in err, err
    assert slurm_mutations(fake_slurm) == before  # an emptied store must not resubmit every task


def test_a_database_from_a_newer_campaignctl_is_refused(
        campaign: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    engine = Store.open().engine
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO schema_migrations VALUES ('099_from_the_future', 'later')")
    engine.dispose()
    code, _, err = run_main(monkeypatch, capsys, "status")
    assert code == 73 and "099_from_the_future" in err and "newer campaignctl" in err, err


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_database_is_refused(
        url: str, state_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CAMPAIGNCTL_DB_URL", url)
    code, _, err = run_main(monkeypatch, capsys, "status")
    assert code == 73 and "in memory" in err, err
