"""The hash chain: an intact chain verifies; each kind of tampering names the first bad row."""

from __future__ import annotations

import dataclasses

import pytest

from campaignctl.core.governance.chain import (
    DECISION_FIELDS,
    GENESIS,
    OUTCOME_FIELDS,
    Head,
    StoredRow,
    extend_chain,
    row_hash,
    verify_chain,
)


def outcome_values(i: int, status: str = "applied") -> tuple[object, ...]:
    return (i, i, status, "{}", "", f"2024-05-01T10:00:{i:02d}+00:00")


def outcomes(n: int) -> list[StoredRow]:
    """A correctly chained outcome log of n rows, ids 1..n (the builder every case starts from)."""
    values = [outcome_values(i) for i in range(1, n + 1)]
    links = extend_chain("", OUTCOME_FIELDS, values)
    return [StoredRow(v[0], p, h, v) for v, (p, h) in zip(values, links, strict=True)]  # type: ignore[arg-type]


def edited(row: StoredRow, status: str) -> StoredRow:
    return dataclasses.replace(row, values=outcome_values(row.id, status))


def rehashed(row: StoredRow, prev: str) -> StoredRow:
    """The row re-chained after `prev`: what someone who knows the scheme would write."""
    return dataclasses.replace(row, prev_hash=prev, row_hash=row_hash(prev, OUTCOME_FIELDS, row.values))


def test_an_intact_chain_verifies_with_its_count_and_head() -> None:
    rows = outcomes(5)
    report = verify_chain("outcome", rows)
    assert report.ok and report.rows == 5 and report.head == Head(5, rows[-1].row_hash)
    assert rows[0].prev_hash == GENESIS


def test_an_empty_chain_verifies() -> None:
    report = verify_chain("decision", [])
    assert report.ok and report.rows == 0 and report.head == Head(0, GENESIS)


def test_the_hash_covers_the_id_and_every_content_column() -> None:
    base = tuple(range(len(DECISION_FIELDS)))
    hashes = {row_hash(GENESIS, DECISION_FIELDS, (*base[:i], 99, *base[i + 1:])) for i in range(len(base))}
    assert len(hashes) == len(DECISION_FIELDS)  # changing any one column changes the hash


def test_values_read_back_with_sqlite_affinity_hash_the_same() -> None:
    # SQLite stores "3" in an INTEGER column as 3; the writer and the verifier must agree.
    assert row_hash(GENESIS, OUTCOME_FIELDS, ("3", 1, "ok", "{}", "", "t")) == \
        row_hash(GENESIS, OUTCOME_FIELDS, (3, 1, "ok", "{}", "", "t"))


def tampered(rows: list[StoredRow], case: str) -> list[StoredRow]:
    rows = list(rows)
    if case == "edited":
        rows[2] = edited(rows[2], "failed")
    elif case == "deleted-middle":
        del rows[2]
    elif case == "deleted-first":
        del rows[0]
    elif case == "deleted-two":
        del rows[1:3]
    elif case == "edited-and-rehashed":  # the row's own hash recomputed, the next row now disagrees
        rows[2] = rehashed(edited(rows[2], "failed"), rows[1].row_hash)
    elif case == "swapped":  # two rows' contents and hashes exchanged, ids kept
        second, third = rows[1], rows[2]
        rows[1] = StoredRow(2, third.prev_hash, third.row_hash, (2, *third.values[1:]))
        rows[2] = StoredRow(3, second.prev_hash, second.row_hash, (3, *second.values[1:]))
    elif case == "unchained":
        rows[3] = dataclasses.replace(rows[3], prev_hash="", row_hash="")
    return rows


@pytest.mark.parametrize(("case", "bad_id", "message"), [
    ("edited", 3, "outcome #3: content does not match its hash (edited)"),
    ("deleted-middle", 3, "outcome #3 is missing (deleted)"),
    ("deleted-first", 1, "outcome #1 is missing (deleted)"),
    ("deleted-two", 2, "outcomes #2–#3 are missing (deleted)"),
    ("edited-and-rehashed", 4, "outcome #4: prev_hash does not match outcome #3 (a row before it was deleted"),
    ("swapped", 2, "outcome #2: content does not match its hash (edited)"),
    ("unchained", 4, "outcome #4 has no hash (written without the chain"),
])
def test_tampering_names_the_first_bad_row(case: str, bad_id: int, message: str) -> None:
    report = verify_chain("outcome", tampered(outcomes(6), case))
    assert not report.ok
    assert report.problem.startswith(message), report.problem
    assert report.bad_id == bad_id


def test_a_deleted_last_row_is_invisible_without_a_head_and_caught_with_one() -> None:
    rows = outcomes(6)
    recorded = Head(6, rows[-1].row_hash)
    assert verify_chain("outcome", rows[:-1]).ok  # a shorter chain is a valid chain
    report = verify_chain("outcome", rows[:-1], recorded)
    assert report.problem == "the log ends at outcome #5 but the head file recorded #6: 1 row(s) removed from the end"


def test_a_chain_rewritten_consistently_is_caught_only_by_the_head() -> None:
    rows = outcomes(4)
    recorded = Head(4, rows[-1].row_hash)
    rewritten, prev = [], GENESIS
    for row in [edited(rows[0], "failed"), *rows[1:]]:
        row = rehashed(row, prev)
        rewritten.append(row)
        prev = row.row_hash
    assert verify_chain("outcome", rewritten).ok
    report = verify_chain("outcome", rewritten, recorded)
    assert report.problem == "outcome #4 differs from the head file (the chain was rewritten up to it)"


def test_rows_appended_after_the_head_was_written_are_fine() -> None:
    rows = outcomes(6)
    assert verify_chain("outcome", rows, Head(4, rows[3].row_hash)).ok
    assert verify_chain("outcome", rows, Head(0, GENESIS)).ok


def test_extend_chain_continues_from_the_head_hash() -> None:
    rows = outcomes(4)
    tail = extend_chain(rows[1].row_hash, OUTCOME_FIELDS, [r.values for r in rows[2:]])
    assert tail == [(r.prev_hash, r.row_hash) for r in rows[2:]]
