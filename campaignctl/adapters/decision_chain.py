"""The decision log's hash chain as stored: rows read back for verification and export, and the
chain head file (the last row of each chain, kept outside the database)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import sqlalchemy as sa

from campaignctl.adapters.decision_log import chain_head
from campaignctl.adapters.paths import write_atomic
from campaignctl.adapters.store_engine import driver_sql, utc_now
from campaignctl.core.base.errors import IntegrityError, NotFoundError, StateError
from campaignctl.core.governance.chain import CHAINS, GENESIS, Head, StoredRow, UndecodableText

HEAD_ENV = "CAMPAIGNCTL_CHAIN_HEAD"
TABLES = {"decision": "decisions", "outcome": "decision_outcomes"}
HEAD_KEYS = {"decision": "decisions", "outcome": "outcomes"}


@contextmanager
def stored_rows(engine: sa.Engine, chain: str) -> Iterator[Iterator[StoredRow]]:
    """Every row of a chain in id order, streamed (a log can hold millions of rows), each value
    as stored: SQLite text that is not UTF-8 comes back as `UndecodableText`, not an error."""
    columns = ", ".join(name for name, _ in CHAINS[chain])
    sql = f"SELECT prev_hash, row_hash, {columns} FROM {TABLES[chain]} ORDER BY id"
    with engine.connect() as conn, _lenient_text(conn):
        result = conn.execution_options(stream_results=True).exec_driver_sql(sql)
        yield (StoredRow(int(r[2]), r[0], r[1], tuple(r[2:])) for r in result)


def missing_tables(engine: sa.Engine) -> list[str]:
    """The log's tables that are not in the database (dropped behind campaignctl's back)."""
    inspector = sa.inspect(engine)
    return [table for table in TABLES.values() if not inspector.has_table(table)]


@contextmanager
def _lenient_text(conn: sa.Connection) -> Iterator[None]:
    """sqlite3 raises OperationalError ("Could not decode to UTF-8") on the first text value that
    is not UTF-8 and ends the read; decode per value instead, so verify can name the row."""
    raw = conn.connection.dbapi_connection
    if conn.dialect.name != "sqlite" or raw is None:
        yield
        return
    lite = cast(sqlite3.Connection, raw)  # the dialect is sqlite: its DB-API connection is sqlite3's
    saved = lite.text_factory
    lite.text_factory = _decode
    try:
        yield
    finally:
        lite.text_factory = saved


def _decode(data: bytes) -> str | UndecodableText:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return UndecodableText(data)


def heads(engine: sa.Engine) -> dict[str, Head]:
    with engine.connect() as conn:
        return {chain: chain_head(conn, table) for chain, table in TABLES.items()}


def campaign_decisions(engine: sa.Engine, campaign_id: int) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql(driver_sql(
            conn, "SELECT COUNT(*) FROM decisions WHERE campaign_id = ?"), (campaign_id,)).scalar_one())


def export_rows(engine: sa.Engine, campaign_id: int) -> Iterator[dict[str, object]]:
    """The campaign's decisions oldest first, each with its outcome (None when it has none), every
    column as stored so that each row's hash can be recomputed from the export alone."""
    d_cols = [name for name, _ in CHAINS["decision"]] + ["prev_hash", "row_hash"]
    o_cols = [name for name, _ in CHAINS["outcome"]] + ["prev_hash", "row_hash"]
    sql = (f"SELECT c.name, {', '.join('d.' + c for c in d_cols)}, {', '.join('o.' + c for c in o_cols)} "
           "FROM decisions d JOIN campaigns c ON c.id = d.campaign_id "
           "LEFT JOIN decision_outcomes o ON o.decision_id = d.id WHERE d.campaign_id = ? ORDER BY d.id")
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True).exec_driver_sql(driver_sql(conn, sql), (campaign_id,))
        for r in result:
            decision = dict(zip(d_cols, r[1:1 + len(d_cols)], strict=True))
            outcome = r[1 + len(d_cols):]
            yield {"campaign": r[0], **decision,
                   "outcome": dict(zip(o_cols, outcome, strict=True)) if outcome[0] is not None else None}


def write_head_file(engine: sa.Engine, path: Path) -> dict[str, object]:
    """Write the heads of both chains to `path` (temp then rename, mode 0600)."""
    current = heads(engine)
    document: dict[str, object] = {
        HEAD_KEYS[chain]: {"id": head.id, "row_hash": head.row_hash} for chain, head in current.items()}
    document["written_at"] = utc_now()
    try:
        write_atomic(path, json.dumps(document, indent=2) + "\n", mode=0o600)
    except OSError as exc:
        raise StateError(f"cannot write the chain head file {path}: {exc} (the tick itself was recorded)",
                         f"point {HEAD_ENV} at a file in a writable directory") from None
    return document


def write_head_if_asked(engine: sa.Engine) -> None:
    """After a tick: refresh the head file when CAMPAIGNCTL_CHAIN_HEAD names one."""
    if path := os.environ.get(HEAD_ENV):
        write_head_file(engine, Path(path))


def read_head_file(path: Path) -> dict[str, Head]:
    """The heads recorded in a head file; a file that is not one is itself a sign of tampering."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFoundError(f"no chain head file at {path}",
                            f"head files are written after each reconcile tick when {HEAD_ENV} is set") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IntegrityError(f"{path} is not a chain head file: {exc}", _HEAD_HINT) from None
    try:
        return {chain: _parse_head(document[key]) for chain, key in HEAD_KEYS.items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise IntegrityError(f"{path} is not a chain head file: bad or missing {exc}", _HEAD_HINT) from None


_HEAD_HINT = 'a head file holds {"decisions": {"id": N, "row_hash": H}, "outcomes": {...}, "written_at": ...}'


def _parse_head(entry: dict[str, object]) -> Head:
    head_id, digest = entry["id"], entry["row_hash"]
    if not isinstance(head_id, int) or head_id < 0 or not isinstance(digest, str) or len(digest) != len(GENESIS):
        raise ValueError(f"entry {entry!r}")
    return Head(head_id, digest)
