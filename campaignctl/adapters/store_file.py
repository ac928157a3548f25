"""The database as a file and as a source of errors: a SQLite file is created private (0600) and
whole, never left empty; an empty, in-memory or damaged one is refused; every DBAPI error the
engine raises, SQLite's or PostgreSQL's, becomes a user-facing error of the family, with a hint
(the CLI's exit code): 75 when the next try may pass (a lock, a lost connection), 73 otherwise."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from pathlib import Path

import sqlalchemy as sa

from campaignctl.adapters.store_migrations import APPEND_ONLY_MESSAGE, APPEND_ONLY_TABLES
from campaignctl.core.base.errors import (
    CampaignctlError,
    DatabaseBusyError,
    IntegrityError,
    StateError,
    WriteConflictError,
)

# SQLite result codes (sqlite.org/rescode.html) by what they mean for the user. BUSY/LOCKED: another
# connection holds the lock past busy_timeout. FULL: the disk (or max_page_count) is full.
# NOTADB/CORRUPT: the file is not, or no longer, a database.
_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
_FULL = ("SQLITE_FULL",)
_DAMAGED = ("SQLITE_NOTADB", "SQLITE_CORRUPT")
_READONLY = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")
_CODE_SIGNALS = (sa.exc.ProgrammingError, sa.exc.NotSupportedError)
# A unique or primary key another writer took first (PostgreSQL 23505; SQLite's extended codes):
# a race, and the next try reads what the other wrote.
_PG_UNIQUE = "23505"
_UNIQUE = ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY")
# PostgreSQL SQLSTATEs (postgresql.org/docs/current/errcodes-appendix.html) by what they mean for the
# user. Busy: a lock, a serialization failure or deadlock, a statement or lock timeout, a server
# shutting down or starting: nothing was changed and the next try may pass. Gone: the connection
# broke (class 08). Denied: a privilege the role lacks. The rest name a setup problem.
_PG_BUSY = ("40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03", "53300", "53400")
_PG_GONE_CLASS = "08"
_PG_DENIED = ("42501",)
_PG_FULL = ("53100",)
_PG_DAMAGED = ("XX001", "XX002")
_PG_READONLY = ("25006",)
MEMORY_HINT = "set CAMPAIGNCTL_DB_URL to sqlite:///PATH (a file) or postgresql+psycopg://…, or unset it"


def prepare_sqlite(url: sa.URL) -> None:
    """Refuse an in-memory database (every command would start from nothing and submit every task
    again); create a missing file private and with its first table; refuse an empty one."""
    path = url.database
    if not path or path == ":memory:" or url.query.get("mode") == "memory":
        raise StateError(f"the database URL {url.render_as_string()!r} is a database in memory: it is "
                         "forgotten when the command ends, so campaigns could not be followed", MEMORY_HINT)
    database = Path(path)
    try:
        size = database.stat().st_size
    except FileNotFoundError:
        _create(database)
        return
    except OSError as exc:
        raise StateError(f"cannot use the database {database}: {exc}", "check the path and its permissions") from None
    if size == 0:
        raise StateError(
            f"the database {database} is empty (0 bytes): not a new store but one that lost its content",
            "restore it from a backup; or, to start afresh, remove the file: campaignctl then forgets every "
            "campaign in it, and submitting a spec again would submit all its tasks again")


def _create(database: Path) -> None:
    """A new database file, mode 0600 whatever the umask, holding its first table before it takes
    its name: a crash never leaves an empty file to be refused (or mistaken for a store)."""
    tmp = database.with_name(f".{database.name}.new{os.getpid()}")
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.chmod(tmp, 0o600)
        with contextlib.closing(sqlite3.connect(tmp)) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                         "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
            conn.commit()
        _publish(tmp, database)
    except OSError as exc:
        raise StateError(f"cannot create the database {database}: {exc.strerror or exc}",
                         "check that the directory exists and is writable") from None
    finally:
        tmp.unlink(missing_ok=True)


def _publish(tmp: Path, database: Path) -> None:
    """Give `tmp` the name `database` unless another process created it meanwhile (then use theirs)."""
    try:
        os.link(tmp, database)
    except FileExistsError:
        pass
    except OSError:  # a filesystem without hard links: rename, after one more look
        if not database.exists():
            os.rename(tmp, database)


def translate_errors(engine: sa.Engine) -> None:
    """Every DBAPI error of `engine` about the database itself (on connect, execute or commit:
    locked, full, damaged, unreachable) is raised as the family's."""
    sqlite = engine.dialect.name == "sqlite"
    where = (engine.url.database if sqlite else None) or engine.url.render_as_string(hide_password=True)
    user = engine.url.username or ""

    @sa.event.listens_for(engine, "handle_error")
    def _translate(context: sa.engine.ExceptionContext) -> None:
        state = getattr(context.original_exception, "sqlstate", None) or ""
        if APPEND_ONLY_MESSAGE in str(context.original_exception):
            raise append_only_error(context.original_exception, where) from None
        if state in _PG_DENIED:
            raise permission_error(context.original_exception, where, user) from None
        if isinstance(context.sqlalchemy_exception, sa.exc.IntegrityError):
            raise constraint_error(context.original_exception, where) from None
        if isinstance(context.sqlalchemy_exception, _CODE_SIGNALS) and not state.startswith(("40", "08")):
            return  # an SQL error says something about the code: left to it
        raise database_error(context.original_exception, where) from None


def app_grants(role: str) -> list[str]:
    """What the owner role runs to let `role` use the database: read and write every table, but only
    read and append the decision log; and the same for the tables later versions' migrations create
    (default privileges apply to objects the role running ALTER DEFAULT PRIVILEGES creates)."""
    return [f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
            f"REVOKE UPDATE, DELETE ON {', '.join(APPEND_ONLY_TABLES)} FROM {role}",
            f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}",
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}",
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {role}"]


def permission_error(exc: BaseException, where: str, user: str) -> CampaignctlError:
    """PostgreSQL refused the role a privilege: on a table (the application role was not granted
    it, or asked to change the decision log) or on the schema (only the owner role may create
    tables, i.e. run a new version's migrations)."""
    text = str(exc).strip()
    role = user or "this role"
    if "for schema" in text.lower():
        hint = (f"a new campaignctl migrates the database on its first command: run that command once as the "
                f"owner role (the role that owns the schema), then {role} can go on; or have the owner run "
                f"GRANT CREATE ON SCHEMA public TO {role}")
    else:
        hint = (f"the decision log ({', '.join(APPEND_ONLY_TABLES)}) is append-only, so no role gets UPDATE or "
                f"DELETE there; for the rest, the owner role grants {role} its rights by running: "
                f"{'; '.join(app_grants(role))}")
    return StateError(f"the database {where} refused {role}: {text}", hint)


def constraint_error(exc: BaseException, where: str) -> CampaignctlError:
    """A write the schema refused. A unique key another writer took first is a race (75, run again:
    the next try reads what the other wrote); any other rule (NOT NULL, a foreign key, a check,
    checks) refused what this campaignctl wrote (73)."""
    text = str(exc).strip()
    state = getattr(exc, "sqlstate", None) or ""
    diag = getattr(exc, "diag", None)
    if state == _PG_UNIQUE or getattr(exc, "sqlite_errorname", "") in _UNIQUE:
        named = re.search(r'constraint "([^"]+)"|constraint failed: (.+)$', text, re.MULTILINE)
        constraint = getattr(diag, "constraint_name", None) or (named and (named[1] or named[2])) or ""
        return WriteConflictError(
            f"another campaignctl wrote the same row of the database {where} at the same moment: {text}",
            "this command's transaction was rolled back: run it again (cron's next tick will)", constraint)
    return StateError(f"the database {where} refused a write: {text}",
                      "nothing of this transaction was written; unless the schema was changed by hand, "
                      "this is a bug in campaignctl: please report the message")


def append_only_error(exc: BaseException, where: str) -> CampaignctlError:
    """A trigger refused to change or delete a row of the decision log (SQLite since 002,
    PostgreSQL since 013): nothing was written."""
    first_line = str(exc).strip().splitlines()[0]
    return IntegrityError(f"the database {where} refused to change the decision log: {first_line}",
                          "its rows are only ever appended; this command changed nothing. If a script or a "
                          "tool ran this, stop it; `campaignctl log verify` checks that the log is intact")


def database_error(exc: BaseException, where: str) -> CampaignctlError:
    state = getattr(exc, "sqlstate", None)
    if state is not None or type(exc).__module__.startswith("psycopg"):
        return _postgres_error(exc, state or "", where)
    code = getattr(exc, "sqlite_errorname", "")
    text = str(exc)
    lowered = text.lower()
    if code in _BUSY or "database is locked" in lowered or "lock timeout" in lowered:
        return DatabaseBusyError(
            f"the database {where} stayed locked: {text}",
            "another campaignctl or a tool such as sqlite3 holds its write lock; this command changed "
            "nothing: run it again later (cron's next tick will)")
    if code in _FULL or "disk is full" in lowered or "no space left" in lowered:
        return StateError(f"the database {where} cannot grow: {text}",
                          "free space on its filesystem (df -h), then run the command again")
    if code in _DAMAGED or "not a database" in lowered or "malformed" in lowered:
        return StateError(f"the database {where} is damaged: {text}",
                          "keep the file for inspection and restore a backup (sqlite3 FILE '.recover' may "
                          "save what is left); campaignctl will not guess at the state of your jobs")
    if code in _READONLY or "readonly" in lowered:
        return StateError(f"cannot write the database {where}: {text}",
                          "check the file's and its directory's permissions and free space")
    return StateError(f"the database {where} cannot be used: {text}",
                      "check CAMPAIGNCTL_DB_URL, the state directory's permissions and free space")


def _postgres_error(exc: BaseException, state: str, where: str) -> CampaignctlError:
    text = str(exc).strip()
    lowered = text.lower()
    if state in _PG_BUSY or state.startswith("40"):
        return DatabaseBusyError(
            f"the database {where} was busy: {text}",
            "another campaignctl held a lock this command needed, or the server was restarting; the "
            "transaction that failed was rolled back: run the command again later (cron's next tick will)")
    if state in _PG_FULL:
        return StateError(f"the database {where} cannot grow: {text}",
                          "free space on the database server's disk, then run the command again")
    if state in _PG_DAMAGED:
        return StateError(f"the database {where} is damaged: {text}",
                          "restore a backup (pg_dump/pg_restore); campaignctl will not guess at the state of your jobs")
    if state in _PG_READONLY:
        return StateError(f"cannot write the database {where}: {text}",
                          "the server is read-only (a standby?): point CAMPAIGNCTL_DB_URL at the primary")
    if state.startswith(_PG_GONE_CLASS) or (not state and not _refused_login(lowered)):
        # psycopg reports a connection that failed or broke (refused, reset, timed out) without a
        # SQLSTATE, as libpq does; a refused login or a missing database only by libpq's words.
        return DatabaseBusyError(
            f"no connection to the database {where}: {text}",
            "the server is down, restarting or unreachable: run the command again when it answers (cron's "
            "next tick will)")
    return StateError(f"the database {where} cannot be used: {text}",
                      "check CAMPAIGNCTL_DB_URL (host, port, database, role and password) and the server's "
                      "pg_hba.conf")


def _refused_login(lowered: str) -> bool:
    return any(words in lowered for words in ("authentication failed", "does not exist", "no pg_hba.conf entry",
                                              "password"))
