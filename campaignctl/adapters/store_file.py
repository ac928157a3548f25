"""The database as a file and as a source of errors: a SQLite file is created private (0600) and
whole, never left empty; an empty, in-memory or damaged one is refused; every DBAPI error the
engine raises becomes a user-facing error of the family, with a hint (the CLI's exit code)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import sqlalchemy as sa

from campaignctl.core.errors import CampaignctlError, DatabaseBusyError, StateError

# SQLite result codes (sqlite.org/rescode.html) by what they mean for the user. BUSY/LOCKED: another
# connection holds the lock past busy_timeout. FULL: the disk (or max_page_count) is full.
# NOTADB/CORRUPT: the file is not, or no longer, a database.
_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
_FULL = ("SQLITE_FULL",)
_DAMAGED = ("SQLITE_NOTADB", "SQLITE_CORRUPT")
_READONLY = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")
_CODE_SIGNALS = (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.NotSupportedError)
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
    where = engine.url.database or engine.url.render_as_string(hide_password=True)

    @sa.event.listens_for(engine, "handle_error")
    def _translate(context: sa.engine.ExceptionContext) -> None:
        if isinstance(context.sqlalchemy_exception, _CODE_SIGNALS):
            return  # a constraint or SQL error says something about the code or a race: left to it
        raise database_error(context.original_exception, where) from None


def database_error(exc: BaseException, where: str) -> CampaignctlError:
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
