"""The hash chain over the decision log: what a row's hash covers and how a chain is checked.

Each row stores `prev_hash` (the previous row's `row_hash`, GENESIS for the first) and
`row_hash = sha256(prev_hash + canonical JSON of its content, id included)`. Editing a row
breaks its own hash; deleting one leaves a gap in the ids and a `prev_hash` that points at
nothing; cutting rows off the end leaves a valid shorter chain, which only a head recorded
earlier (the head file) can expose. Decisions and outcomes are two separate chains, each global
across campaigns (rows are written in id order by one writer at a time).

The definition below is the on-disk format: changing a field list or the encoding invalidates
every chained row ever written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

GENESIS = "0" * 64

# (column, type) in a fixed order. The writer casts its Python values to the column's type before
# hashing (SQLite's column affinity stores "3" as 3 in an INTEGER column, and int() does the same).
# The verifier hashes the values as stored, after checking that each has its column's type: SQLite
# keeps 3.5 or 'one' in an INTEGER column as written, and a cast would hash 3.5 as 3 (an edit
# missed) or raise on 'one'. For a value of the column's type the cast is the identity, so every
# chain written before the check verifies as it did.
DECISION_FIELDS: tuple[tuple[str, type], ...] = (
    ("id", int), ("tick_id", int), ("campaign_id", int), ("task_index", int), ("attempt_token", str),
    ("policy", str), ("policy_digest", str), ("rule", str), ("action", str), ("params_json", str),
    ("inputs_json", str), ("reason", str), ("mode", str), ("group_token", str), ("created_at", str),
    ("revision", int), ("gate", str))
OUTCOME_FIELDS: tuple[tuple[str, type], ...] = (
    ("id", int), ("decision_id", int), ("status", str), ("detail_json", str), ("error", str),
    ("created_at", str))

CHAINS = {"decision": DECISION_FIELDS, "outcome": OUTCOME_FIELDS}


def canonical(fields: Sequence[tuple[str, type]], values: Sequence[object]) -> str:
    """Sorted keys, no whitespace, UTF-8 kept as is: one byte string per row content."""
    content = {name: kind(value) for (name, kind), value in zip(fields, values, strict=True)}
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def row_hash(prev_hash: str, fields: Sequence[tuple[str, type]], values: Sequence[object]) -> str:
    return hashlib.sha256((prev_hash + canonical(fields, values)).encode()).hexdigest()


def extend_chain(head_hash: str, fields: Sequence[tuple[str, type]],
                 rows: Iterable[Sequence[object]]) -> list[tuple[str, str]]:
    """(prev_hash, row_hash) for each new row appended after a head whose hash is `head_hash`
    ("" when the chain is empty): one pass, so a tick's 10,000 decisions hash in one go."""
    prev = head_hash or GENESIS
    out = []
    for values in rows:
        current = row_hash(prev, fields, values)
        out.append((prev, current))
        prev = current
    return out


@dataclass(frozen=True, slots=True)
class UndecodableText:
    """A TEXT value whose bytes are not UTF-8, as the store read it back."""

    raw: bytes


_TYPE_NAMES = {int: "an integer", str: "text", float: "a real number", bytes: "bytes (a BLOB)",
               type(None): "NULL", UndecodableText: "text that is not valid UTF-8"}


def type_problem(fields: Sequence[tuple[str, type]], values: Sequence[object]) -> str:
    """'' if every stored value has its column's type, else which column holds what."""
    for (name, kind), value in zip(fields, values, strict=True):
        if type(value) is not kind:
            held = _TYPE_NAMES.get(type(value), type(value).__name__)
            return f"{name} holds {held} ({value!r:.40}), not {_TYPE_NAMES[kind]}"
    return ""


@dataclass(frozen=True, slots=True)
class Head:
    """The last row of a chain: id 0 and GENESIS for an empty one."""

    id: int
    row_hash: str


EMPTY = Head(0, GENESIS)


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A row as read back: its id, the stored hashes, and its content in the fields' order."""

    id: int
    prev_hash: str
    row_hash: str
    values: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class ChainReport:
    chain: str  # decision | outcome
    rows: int
    head: Head
    problem: str = ""  # the first break, "" when the chain is intact
    bad_id: int | None = None  # the row the problem names

    @property
    def ok(self) -> bool:
        return not self.problem


def verify_chain(chain: str, rows: Iterable[StoredRow], recorded: Head | None = None) -> ChainReport:
    """Walk `rows` (id order) and report the first break; with `recorded` (a head written
    earlier), also the loss of rows from the end or a chain rewritten up to that head."""
    fields, walk = CHAINS[chain], _Walk(chain, recorded)
    for row in rows:
        if problem := walk.step(row, fields):
            bad_id = walk.head.id + 1 if row.id > walk.head.id + 1 else row.id  # a gap: its first id
            return ChainReport(chain, walk.count, walk.head, problem, bad_id)
    if recorded is not None and (problem := walk.against(recorded)):
        return ChainReport(chain, walk.count, walk.head, problem, recorded.id)
    return ChainReport(chain, walk.count, walk.head)


class _Walk:
    """One pass: the last good row, and the stored hash of the row the head file names."""

    def __init__(self, chain: str, recorded: Head | None) -> None:
        self.chain = chain
        self.count = 0
        self.head = EMPTY
        self.watch = recorded.id if recorded else None
        self.watched_hash: str | None = None

    def step(self, row: StoredRow, fields: Sequence[tuple[str, type]]) -> str:
        name, prev = self.chain, self.head
        if row.id != prev.id + 1:
            if row.id > prev.id + 1:
                return _missing(name, prev.id + 1, row.id - 1)
            return f"{name} #{row.id} comes after #{prev.id}: ids out of order (rows rewritten)"
        if not row.row_hash:
            return f"{name} #{row.id} has no hash (written without the chain, e.g. by an older campaignctl)"
        if problem := type_problem(fields, row.values):
            return f"{name} #{row.id}: {problem} (edited)"
        if row_hash(row.prev_hash, fields, row.values) != row.row_hash:
            return f"{name} #{row.id}: content does not match its hash (edited)"
        if row.prev_hash != prev.row_hash:
            before = f"{name} #{prev.id}" if prev.id else "the start of the chain"
            return (f"{name} #{row.id}: prev_hash does not match {before} "
                    "(a row before it was deleted or changed)")
        self.count += 1
        self.head = Head(row.id, row.row_hash)
        if row.id == self.watch:
            self.watched_hash = row.row_hash
        return ""

    def against(self, recorded: Head) -> str:
        name, head = self.chain, self.head
        if recorded.id > head.id:
            return (f"the log ends at {name} #{head.id} but the head file recorded #{recorded.id}: "
                    f"{recorded.id - head.id} row(s) removed from the end")
        if recorded.id == 0:  # the head was written before the first row: nothing to compare
            return ""
        if self.watched_hash != recorded.row_hash:
            return f"{name} #{recorded.id} differs from the head file (the chain was rewritten up to it)"
        return ""


def _missing(name: str, first: int, last: int) -> str:
    if first == last:
        return f"{name} #{first} is missing (deleted)"
    return f"{name}s #{first}–#{last} are missing (deleted)"
