"""The store's database engine and the SQL every store module shares: opening SQLite or PostgreSQL
with their session settings, migrations, the database-wide write lock, and statements the two
dialects write differently."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from operator import itemgetter
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from campaignctl.adapters import paths
from campaignctl.adapters.store_file import prepare_sqlite, translate_errors
from campaignctl.adapters.store_migrations import MIGRATIONS
from campaignctl.core.base.errors import StateError


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


BUSY_TIMEOUT_MS = 15_000  # how long a write waits for another process's lock before exit 75


def default_url() -> str:
    """The private default database (created 0600 by `prepare_sqlite`; an existing one made 0600)."""
    db = paths.state_dir() / "campaignctl.db"
    if db.exists():
        paths.private_file(db)
    return f"sqlite:///{db}"


class _DbapiConnection(Protocol):
    """What a `connect` event hands over: the driver's own connection (sqlite3's, psycopg's)."""

    def cursor(self) -> Any: ...
    def commit(self) -> None: ...


def _sqlite_pragmas(engine: sa.Engine, db_path: Path) -> None:
    journal = "DELETE" if paths.filesystem_type(db_path.parent) in paths.NETWORK_FS else "WAL"

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: _DbapiConnection, _record: object) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")  # first: changing journal_mode may wait too
        cursor.execute(f"PRAGMA journal_mode={journal}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


# A statement that runs longer than this ends with SQLSTATE 57014 (exit 75): the largest tick's
# query (100,000 attempts) takes seconds; a server so loaded that one takes minutes is down.
STATEMENT_TIMEOUT_MS = 300_000


def _postgres_timeouts(engine: sa.Engine) -> None:
    """Every session waits for a lock at most BUSY_TIMEOUT_MS, as SQLite's busy_timeout: another
    session's table lock (an `ALTER TABLE`, a `LOCK TABLE` held in an open transaction, a
    `VACUUM FULL`) once held a tick as long as it was held; now the statement ends with SQLSTATE
    55P03 and the command with exit 75. Set per session, not as startup options, which a
    transaction-pooling PgBouncer refuses."""
    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: _DbapiConnection, _record: object) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute(f"SET lock_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        cursor.close()
        dbapi_conn.commit()  # psycopg began a transaction for the SETs


def _shown(url: str) -> str:
    """The URL without its password (an error message may end up in a log or a ticket)."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


# Keys of the PostgreSQL advisory locks (any constants every version uses; advisory locks are per
# database, so databases on one server do not wait for each other): migrations, and appends to the
# decision log's hash chains.
MIGRATION_LOCK_KEY = 0x63616D70  # "camp"
CHAIN_LOCK_KEY = 0x63686E31  # "chn1"


def write_lock(conn: sa.Connection, key: int, wait: bool = False) -> None:
    """Hold a database-wide write lock until this transaction ends; the transaction's first
    statement. PostgreSQL: the advisory lock `key` (under READ COMMITTED each later statement
    sees what the previous holder committed); unless `wait`, waited for no longer than the
    session's lock_timeout (SQLite's busy timeout; then SQLSTATE 55P03: exit 75), so a holder that
    hangs inside its transaction does not hang every other writer. SQLite: the write lock itself (`BEGIN IMMEDIATE`,
    under busy_timeout): sqlite3 would otherwise begin only at the first write (and run DDL outside
    any transaction), so a read before it could see a state another writer is about to change."""
    if conn.dialect.name == "postgresql":
        if wait:  # migrations: every other process waits for the one migrating, however long
            conn.exec_driver_sql("SET LOCAL lock_timeout = 0")
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({key})")
    elif conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _read_only_url(database: Path) -> sa.URL:
    """The database in a directory this user cannot write (a read-only mount, a teammate's
    directory, one made 0500): SQLite creates its -shm (WAL) or -journal file beside the database
    even to read, so it would open nothing there. `status`, `results` and `log` read; a write
    fails "attempt to write a readonly database" (exit 73). With no write-ahead log left beside it
    (the last writer closed it), `immutable=1` reads the file without -shm and without locks
    (sqlite.org/uri.html). With one (a writer is still at work, or died), committed pages may be
    in the log alone: an immutable read would miss them, so it is opened read-only through the
    log and its -shm, which SQLite can do when both exist (sqlite.org/wal.html, "read-only
    databases")."""
    wal = database.with_name(database.name + "-wal")
    live = wal.exists() and wal.stat().st_size > 0
    return sa.URL.create("sqlite", database=f"file:{quote(str(database))}",
                         query={"mode": "ro", "uri": "true", **({} if live else {"immutable": "1"})})


def open_engine(url: str) -> sa.Engine:
    """The engine of `url`, its sessions set up (SQLite: pragmas; PostgreSQL: timeouts)."""
    try:
        engine = sa.create_engine(url)
    except ImportError as exc:
        raise StateError(f"cannot use database URL {_shown(url)!r}: {exc}",
                         "PostgreSQL needs its driver: pip install 'campaignctl[postgres]'") from None
    except sa.exc.ArgumentError as exc:
        raise StateError(f"cannot use database URL {_shown(url)!r}: {exc}",
                         "CAMPAIGNCTL_DB_URL takes sqlite:///PATH or postgresql+psycopg://…") from None
    if engine.dialect.name == "sqlite":
        prepare_sqlite(engine.url)
        database = Path(str(engine.url.database))
        if os.access(database.parent, os.W_OK):
            _sqlite_pragmas(engine, database)
        else:
            engine.dispose()
            engine = sa.create_engine(_read_only_url(database))
    elif engine.dialect.name == "postgresql":
        _postgres_timeouts(engine)
    translate_errors(engine)
    return engine


def migrate(engine: sa.Engine) -> list[str]:
    """Apply the migrations this database lacks, each in its own transaction under a lock that
    every process migrating the same database takes (two users' first commands at once would
    otherwise both create the same tables), and recheck under it what is done."""
    with engine.begin() as conn:
        if not sa.inspect(conn).has_table("schema_migrations"):
            write_lock(conn, MIGRATION_LOCK_KEY, wait=True)
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS schema_migrations "
                                 "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        done = {r[0] for r in conn.exec_driver_sql("SELECT name FROM schema_migrations")}
    if unknown := sorted(done - {name for name, _ in MIGRATIONS}):
        raise StateError(f"the database was written by a newer campaignctl (migrations {', '.join(unknown)} "
                         "are unknown to this version)", "upgrade campaignctl, or point CAMPAIGNCTL_DB_URL "
                         "at another database; this version will not guess at a newer schema")
    applied: list[str] = []
    for name, apply in MIGRATIONS:
        if name in done:
            continue
        with engine.begin() as conn:
            write_lock(conn, MIGRATION_LOCK_KEY, wait=True)
            if conn.execute(sa.text("SELECT 1 FROM schema_migrations WHERE name = :name"),
                            {"name": name}).first():
                continue  # another process applied it while this one waited for the lock
            apply(conn)
            conn.execute(sa.text("INSERT INTO schema_migrations VALUES (:name, :at)"),
                         {"name": name, "at": utc_now()})
        applied.append(name)
    return applied


@contextmanager
def rederivable(conn: sa.Connection) -> Iterator[None]:
    """For a transaction whose writes the next tick makes again if they are lost (observations:
    sacct still says the same): on SQLite in WAL mode, its commit does not wait for fsync
    (`synchronous=NORMAL`, then the connection's level again). Still durable when the process
    crashes: the commit is in the WAL before it returns (sqlite.org/pragma.html#pragma_synchronous).
    A power loss may drop it, but only it and later unsynced commits: the next commit at FULL
    (every decision's) syncs the WAL whole, this one included, so a committed decision never
    rests on an observation that could vanish. Not in rollback-journal mode (a network
    filesystem, `_sqlite_pragmas`), where NORMAL risks more than the last commit."""
    raw = conn.connection.dbapi_connection
    if conn.dialect.name != "sqlite" or raw is None or raw.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        yield
        return
    level = int(raw.execute("PRAGMA synchronous").fetchone()[0])
    raw.execute("PRAGMA synchronous=NORMAL")  # outside a transaction: sqlite refuses it inside one
    try:
        yield
    finally:
        try:
            raw.execute(f"PRAGMA synchronous={level}")
        except Exception:
            conn.invalidate()  # never back in the pool at NORMAL, where a decision could commit
            raise


def inserted_id(result: sa.CursorResult[Any]) -> int:
    """The primary key of the one row an INSERT wrote (None only for a bulk insert)."""
    key = result.inserted_primary_key
    if key is None:
        raise RuntimeError("the INSERT returned no primary key")
    return int(key[0])


# Values bound in one `IN (…)`: SQLite before 3.32 allows 999 bound parameters in a statement (since,
# 32,766; Debian builds 250,000), PostgreSQL's protocol 65,535. A chunk of 1,001 packed elements of
# 500 tasks named its 500,500 tasks in one statement: "too many SQL variables" on SQLite.
IN_LIMIT = 900
# A task is open while one of its attempts did not COMPLETE or is a retry, and done when its one
# attempt COMPLETED: the tick and a screen read every attempt of the open tasks and count the done
# ones. The partial indexes attempts_open and attempts_done hold the attempts each matches
# (store_migrations._021_SCREENS); SQLite uses such an index only for a query that names its
# condition in these words. `{a}`: the attempts table's alias.
OPEN = "({a}.state != 'COMPLETED' OR {a}.attempt_number > 1)"
DONE = "{a}.state = 'COMPLETED' AND {a}.attempt_number = 1"
_T = TypeVar("_T")


def in_parts(values: Sequence[_T]) -> Iterator[Sequence[_T]]:
    """`values` in parts small enough for one `IN (…)` each (IN_LIMIT)."""
    for start in range(0, len(values), IN_LIMIT):
        yield values[start:start + IN_LIMIT]


def insert_many(conn: sa.Connection, table: sa.Table, rows: Sequence[Mapping[str, object]]) -> None:
    """Insert `rows` (each with the same keys) in one executemany. On SQLite through the driver:
    SQLAlchemy's per-row processing of the parameters was 15 % of a 200,000-task submit; on
    PostgreSQL through SQLAlchemy, whose "insertmanyvalues" sends a thousand rows a statement
    where psycopg's executemany sends one."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(table.insert(), list(rows))
        return
    keys = list(rows[0])
    sql = f"INSERT INTO {table.name} ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})"
    values = itemgetter(*keys)  # each row's values in C, a tuple (a lone key's value is not one)
    conn.exec_driver_sql(sql, list(map(values, rows)) if len(keys) > 1 else [(values(row),) for row in rows])


def driver_sql(conn: sa.Connection, sql: str) -> str:
    """`?` placeholders in the driver's own style: sqlite3 takes `?`, psycopg `%s`."""
    return sql if conn.dialect.paramstyle == "qmark" else sql.replace("?", "%s")


def upsert(conn: sa.Connection, table: sa.Table, rows: Sequence[Mapping[str, object]]) -> None:
    """Insert `rows`, each replacing the row with its primary key if there is one, in one statement
    per row (`INSERT … ON CONFLICT DO UPDATE`, PostgreSQL and SQLite alike). A DELETE then INSERT
    does not do this under concurrency: on PostgreSQL two transactions both delete nothing, both
    insert, and the second fails on the primary key (seen on `telemetry` in issue 15)."""
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)
    keys = [c.name for c in table.primary_key]
    conn.execute(insert.on_conflict_do_update(
        index_elements=keys, set_={c.name: insert.excluded[c.name] for c in table.c if c.name not in keys}),
        list(rows))


