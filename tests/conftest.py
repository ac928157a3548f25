from __future__ import annotations

import os
import resource
import signal
import sys
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl import cli
from campaignctl.adapters import proc, slurm
from campaignctl.adapters.decision_log import DecisionLog, LoggedDecision
from campaignctl.adapters.runner import FORWARDED_SIGNALS, IGNORED_UNLESS_HANDLED
from campaignctl.adapters.store import Store
from campaignctl.core.nodes.evidence import CLEAR, SUSPECT
from campaignctl.core.tick.starts import ACTION as START
from tests.fakeslurm import FakeSlurm

REPO = Path(__file__).resolve().parent.parent
# How long a test waits for a command it starts (a CLI, a database tool): the unit and PostgreSQL
# suites run at nice 10 beside the Slurm suites (scripts/test), where a Python process has waited
# minutes for the CPU (CI run 32: a test of 6 s quiet took 193 s; a `reconcile` ran past 60 s; the
# grading run of stop 57: one process rendering every command's help, 1.9 s quiet, ran past 120 s).
# It is a guard against a hang, not a measure of speed.
COMMAND_TIMEOUT_S = 600


# XDG_STATE_HOME of a test that did not ask for `state_home`: no directory can be made under
# /dev/null (not even by root, as CI runs), so such a test that opens a store fails in the SQLite run
# instead of passing there and silently missing the PostgreSQL run, which keeps tests by `state_home`.
NO_STATE_HOME = "/dev/null/this-test-has-no-state_home-fixture"


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """No test sees the caller's own store, fault injection or head file: a CAMPAIGNCTL_DB_URL
    set during a test is the one its fixtures made, and is passed on to the processes it starts."""
    for name in ("CAMPAIGNCTL_DB_URL", "CAMPAIGNCTL_FAULT", "CAMPAIGNCTL_CHAIN_HEAD"):
        monkeypatch.delenv(name, raising=False)
    if "state_home" not in request.fixturenames:
        monkeypatch.setenv("XDG_STATE_HOME", NO_STATE_HOME)


def _cpu_s() -> float:
    """This process's CPU seconds and those of every child it waited for (subprocess.run waits)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Each test's CPU seconds, set-up to tear-down, as the JUnit property `cpu_s`
    (scripts/suite_report.py lists the heaviest: the machine's CPU is what bounds CI's wall time)."""
    if call.when == "setup":
        item.stash[_CPU_AT_SETUP] = _cpu_s()
    outcome = yield
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        outcome.get_result().user_properties.append(("cpu_s", round(_cpu_s() - item.stash[_CPU_AT_SETUP], 2)))


_CPU_AT_SETUP = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist with CAMPAIGNCTL_TEST_SLURM_CONFS (scripts/test: the lab's slurm.conf and
    lab2's), worker N runs its real-cluster tests on the N-th cluster, which it then has to itself:
    each test still finds an idle cluster, as when one process ran them all. The clusters share
    slurmdbd, the Unix users and the fake GPU devices, nothing a test changes (tests marked `alone`,
    which change what both share, run after, in one process)."""
    confs = os.environ.get("CAMPAIGNCTL_TEST_SLURM_CONFS", "").split()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not confs or not worker.startswith("gw"):
        return
    index = int(worker.removeprefix("gw"))
    if index >= len(confs):
        raise pytest.UsageError(f"xdist worker {worker} has no cluster: CAMPAIGNCTL_TEST_SLURM_CONFS names "
                                f"{len(confs)}; run with -n {len(confs)} or fewer")
    os.environ["SLURM_CONF"] = confs[index]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A run with CAMPAIGNCTL_TEST_STORE=postgresql runs only the tests that have a store (through
    `state_home`): the others would run exactly as in the SQLite run. Nor does it run again those
    that the SQLite run already ran on PostgreSQL (`backend`, `pg_url`): on the same server, alike."""
    if os.environ.get("CAMPAIGNCTL_TEST_STORE") != "postgresql":
        return
    kept = [item for item in items if _runs_on_postgresql_only_here(getattr(item, "fixturenames", ()))]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def _runs_on_postgresql_only_here(fixtures: list[str] | tuple[str, ...]) -> bool:
    return "state_home" in fixtures and "backend" not in fixtures and "pg_url" not in fixtures


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A private, empty campaignctl state directory for this test. Its store is a SQLite file in
    it, or, with CAMPAIGNCTL_TEST_STORE=postgresql, a new database on the lab server (every test
    but those marked `sqlite_only`, which that run skips with their reason)."""
    home = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    if os.environ.get("CAMPAIGNCTL_TEST_STORE") != "postgresql":
        yield home
        return
    if (marker := request.node.get_closest_marker("sqlite_only")) is not None:
        if not marker.kwargs.get("reason"):
            pytest.fail("@pytest.mark.sqlite_only needs reason=: why the test cannot run on PostgreSQL")
        pytest.skip(f"SQLite only: {marker.kwargs['reason']}")
    with pg_database() as url:
        monkeypatch.setenv("CAMPAIGNCTL_DB_URL", url)
        yield home


PG_URL_VAR = "CAMPAIGNCTL_TEST_PG_URL"


def pg_admin_engine() -> sa.Engine:
    """The lab server as its owner role (`eval "$(scripts/pglab up)"` exports the URL), outside any
    transaction (CREATE DATABASE needs that). In CI a server that is not there fails, never skips."""
    url = os.environ.get(PG_URL_VAR)
    if not url:
        message = f"PostgreSQL tests need `eval \"$(scripts/pglab up)\"` ({PG_URL_VAR} unset)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


# The databases this session made on the lab server (dropped at its end), and those of them emptied
# after their test, for the next one.
_MADE: list[str] = []
_EMPTIED: list[str] = []


@contextmanager
def pg_database() -> Iterator[str]:
    """An empty database on the lab server, as a new one is: created, or one that an earlier test
    of this session used, emptied after it (its sessions ended, schema public dropped and made again
    with a new database's owner and rights: 0.15 s on the lab server, against about 2 s for CREATE
    and DROP DATABASE, which write a copy of template1 and wait for a checkpoint)."""
    admin = pg_admin_engine()
    if _EMPTIED:
        name = _EMPTIED.pop()
    else:
        name = f"t_{uuid.uuid4().hex[:16]}"
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        _MADE.append(name)
    url = admin.url.set(database=name)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        _empty(admin, url)
        _EMPTIED.append(name)
        admin.dispose()


def _empty(admin: sa.Engine, url: sa.URL) -> None:
    with admin.connect() as conn:  # the test's sessions (an autovacuum worker there is the server's, yields)
        conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n "
                             "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"), {"n": url.database})
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with engine.connect() as conn:  # waits for the locks of the sessions ending
        conn.exec_driver_sql("DROP SCHEMA public CASCADE")  # tables, functions, default privileges
        conn.exec_driver_sql("CREATE SCHEMA public AUTHORIZATION pg_database_owner")
        conn.exec_driver_sql("GRANT USAGE ON SCHEMA public TO PUBLIC")
    engine.dispose()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _MADE:
        return
    admin = sa.create_engine(os.environ[PG_URL_VAR], isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        for name in _MADE:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()
    _MADE.clear()
    _EMPTIED.clear()


@pytest.fixture
def pg_url(state_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A new, empty PostgreSQL database on the lab server, made this test's store
    (CAMPAIGNCTL_DB_URL, so every command and fixture after this one uses it); dropped after."""
    if os.environ.get("CAMPAIGNCTL_DB_URL", "").startswith("postgresql"):
        yield os.environ["CAMPAIGNCTL_DB_URL"]  # state_home made one already
        return
    with pg_database() as url:
        monkeypatch.setenv("CAMPAIGNCTL_DB_URL", url)
        yield url


@pytest.fixture
def stranger(pg_url: str) -> Iterator[tuple[str, sa.Engine]]:
    """A login role with no rights on the test database's tables, and the owner's engine on it."""
    role = f"r_{uuid.uuid4().hex[:12]}"
    admin = pg_admin_engine()
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN PASSWORD 'stranger'")
    owner = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    yield sa.make_url(pg_url).set(username=role, password="stranger").render_as_string(hide_password=False), owner
    with owner.connect() as conn:  # its grants live in the test database: revoked, so that it may be dropped
        for kind in ("TABLES", "SEQUENCES"):
            conn.exec_driver_sql(f"REVOKE ALL ON ALL {kind} IN SCHEMA public FROM {role}")
            conn.exec_driver_sql(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON {kind} FROM {role}")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP ROLE {role}")


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test once on the default SQLite file and once on a fresh PostgreSQL database."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_url")
    else:
        monkeypatch.delenv("CAMPAIGNCTL_DB_URL", raising=False)
    return str(request.param)


@pytest.fixture
def fake_slurm(monkeypatch: pytest.MonkeyPatch, state_home: Path) -> FakeSlurm:
    fake = FakeSlurm()
    monkeypatch.setattr(proc, "EXECUTOR", fake)
    slurm.forget_site()  # asked once per process: this test's Slurm answers
    monkeypatch.setattr(proc.time, "sleep", lambda _s: None)
    return fake


@pytest.fixture
def keep_signal_handlers() -> Iterator[None]:
    """run_task points SIGINT/SIGTERM/SIGUSR* at its child (and ignores SIGUSR*); give pytest its
    handlers back."""
    saved = {sig: signal.getsignal(sig) for sig in (*FORWARDED_SIGNALS, *IGNORED_UNLESS_HANDLED)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def write_spec(directory: Path, text: str, name: str = "spec.yaml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def logged(name: str, starts: bool = False) -> list[LoggedDecision]:
    """The decisions the log holds for campaign `name`, oldest first; without `starts`, less the
    `start` decisions of its first arrays, with which every campaign's log begins."""
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    entries = DecisionLog(store.engine).entries(record.id)
    return entries if starts else policy_decisions(entries)


def policy_decisions(entries: Iterable[LoggedDecision]) -> list[LoggedDecision]:
    """`entries` less the `start` decisions of campaigns' first arrays (core/tick/starts.py) and
    the node ledger's evidence (core/nodes/evidence.py): what the policy's rules answered and did."""
    return [e for e in entries if e.action not in (START, SUSPECT, CLEAR)]


@pytest.fixture
def slurm_conf() -> str:
    """The real lab cluster. In CI it must be up: a missing cluster fails, never skips."""
    conf = os.environ.get("SLURM_CONF")
    if not conf or not Path(conf).exists():
        message = "real Slurm tests need `eval \"$(scripts/slurmlab up)\"` (SLURM_CONF unset or missing)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    slurm.forget_site()  # the real cluster's version and limits, not a fake's from an earlier test
    return conf


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The installed entry point in this process (so the fake Slurm answers), error boundary included."""
    monkeypatch.setattr(sys, "argv", ["campaignctl", *args])
    monkeypatch.setenv("COLUMNS", "250")
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err
