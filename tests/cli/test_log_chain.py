"""The tamper-evident decision log as a user meets it: a real log written by reconcile ticks
against the fake Slurm, then changed behind campaignctl's back with the stock client (sqlite3, or
psql as the owner role), the way someone with access to the database would, lifting the
append-only triggers first; `log verify` must name what was done."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.core.governance.chain import DECISION_FIELDS, OUTCOME_FIELDS, row_hash
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.cli.test_cli import assert_user_error, run_cli
from tests.conftest import COMMAND_TIMEOUT_S, write_spec
from tests.fakeslurm import FakeSlurm

# task index → (sacct state, exit code, node) in the first array: 5 retries and 1 give-up
FAILURES = {0: ("OUT_OF_MEMORY", "0:125", "node1"), 1: ("FAILED", "1:0", "node1"),
            2: ("TIMEOUT", "0:0", "node2"), 3: ("NODE_FAIL", "0:0", "node3"),
            4: ("PREEMPTED", "0:0", "node4"), 5: ("FAILED", "75:0", "node1")}


def database(state: Path) -> Path:
    return state / "campaignctl" / "campaignctl.db"


def tamper(state: Path, sql: str, *lifted: str) -> None:
    """Run `sql` on the store with its stock client, outside campaignctl, after lifting the
    append-only triggers of the `lifted` tables: sqlite3 drops them, psql (as the owner, who may)
    disables them."""
    url = os.environ.get("CAMPAIGNCTL_DB_URL")
    if url:
        lift = "".join(f"ALTER TABLE {table} DISABLE TRIGGER USER; " for table in lifted)
        libpq_url = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        client("psql", "postgresql-client", "-X", "-q", "-v", "ON_ERROR_STOP=1", libpq_url, "-c", lift + sql)
    else:
        lift = "".join(f"DROP TRIGGER {table}_no_{verb}; " for table in lifted for verb in ("update", "delete"))
        client("sqlite3", "sqlite3", str(database(state)), lift + sql)


def client(name: str, package: str, *args: str) -> None:
    binary = shutil.which(name)
    if binary is None:
        pytest.fail(f"the {name} command-line tool is missing: `apt-get install {package}` (scripts/setup and "
                    "scripts/pglab install it); these tests tamper with the database through it")
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def logged(tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm) -> int:
    """Two reconcile ticks of a real campaign: the first answers six failures, the second the
    retries that failed again. Returns how many decisions the log holds (all with outcomes)."""
    submit(write_spec(tmp_path, """\
name: rc
command: [python3, train.py, "{i}"]
matrix: {i: [0, 1, 2, 3, 4, 5, 6, 7]}
resources: {mem: 1G, time: "00:10:00"}
policy: {use: default, rules: {failed: {backoff: 0}}}
"""))
    first = min(fake_slurm.jobs, key=int)
    for index, (state, code, node) in FAILURES.items():
        fake_slurm.set_state(first, index, state, code, node)
    reconcile("rc")
    for job in fake_slurm.jobs.values():
        if job.job_id != first:
            for i in range(job.size):
                fake_slurm.set_state(job.job_id, i, "FAILED", "75:0", "node2")
    reconcile("rc")
    store = Store.open()
    entries = DecisionLog(store.engine).entries()
    assert len(entries) >= 8 and all(e.outcome_at for e in entries)  # outcomes for every decision
    return len(entries)


def test_an_untouched_log_verifies_with_counts_and_heads(logged: int, state_home: Path) -> None:
    done = run_cli("log", "verify", "rc", state=state_home)
    assert done.returncode == 0, done.stderr
    assert f"decisions: {logged} row(s) intact; head #{logged} " in done.stdout
    assert f"outcomes: {logged} row(s) intact" in done.stdout
    assert f"rc: {logged} of these decisions" in done.stdout
    envelope = json.loads(run_cli("log", "verify", "--json", state=state_home).stdout)
    assert envelope["command"] == "log verify" and envelope["ok"] is True
    assert envelope["data"]["decisions"]["rows"] == logged
    assert len(envelope["data"]["decisions"]["head"]["row_hash"]) == 64


@pytest.mark.parametrize(("tables", "sql", "named"), [
    ("decisions", "UPDATE decisions SET reason='x' WHERE id=3;",
     "decision #3: content does not match its hash (edited)"),
    ("decisions decision_outcomes",  # with its outcome: PostgreSQL holds the foreign key against psql too
     "DELETE FROM decision_outcomes WHERE decision_id=3; DELETE FROM decisions WHERE id=3;",
     "decision #3 is missing (deleted)"),
    ("decision_outcomes", "UPDATE decision_outcomes SET error='edited' WHERE id=4;",
     "outcome #4: content does not match its hash (edited)"),
    ("decision_outcomes", "DELETE FROM decision_outcomes WHERE id=2;", "outcome #2 is missing (deleted)"),
    ("decisions", "UPDATE decisions SET prev_hash=(SELECT row_hash FROM decisions WHERE id=1) WHERE id=4;",
     "decision #4: content does not match its hash (edited)"),
], ids=["edited-decision", "deleted-decision", "edited-outcome", "deleted-outcome", "relinked-decision"])
def test_a_row_changed_with_the_database_client_is_named_and_verify_exits_65(
        logged: int, state_home: Path, tables: str, sql: str, named: str) -> None:
    tamper(state_home, sql, *tables.split())
    done = run_cli("log", "verify", state=state_home)
    assert_user_error(done, 65, "the decision log does not verify", named)
    as_json = run_cli("log", "verify", "--json", state=state_home)
    envelope = json.loads(as_json.stdout)  # one document: what was checked, and the error
    assert as_json.returncode == 65 and as_json.stderr == ""
    assert envelope["ok"] is False and named in json.dumps(envelope["data"], ensure_ascii=False)
    assert envelope["error"]["kind"] == "integrity" and named in envelope["error"]["message"]


def test_the_head_file_is_written_after_each_tick_and_catches_a_deleted_last_row(
        tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    head = tmp_path / "safe" / "head.json"
    head.parent.mkdir()
    monkeypatch.setenv("CAMPAIGNCTL_CHAIN_HEAD", str(head))
    submit(write_spec(tmp_path, "name: rc\ncommand: [python3, x.py]\nmatrix: {i: [0, 1, 2]}\n"
                                "policy: {use: default, rules: {failed: {backoff: 0}}}\n"))
    first = min(fake_slurm.jobs, key=int)
    # the start (#1), then two give-ups: decision #n and its outcome #n (PostgreSQL keeps the foreign key)
    for index in (0, 1):
        fake_slurm.set_state(first, index, "FAILED", "1:0")
    reconcile("rc")
    assert stat.S_IMODE(head.stat().st_mode) == 0o600
    recorded = json.loads(head.read_text())
    assert recorded["decisions"]["id"] == recorded["outcomes"]["id"] == 3 and recorded["written_at"]
    assert run_cli("log", "verify", "--head", str(head), state=state_home).returncode == 0

    tamper(state_home, "DELETE FROM decision_outcomes WHERE id=3; DELETE FROM decisions WHERE id=3;",
           "decisions", "decision_outcomes")
    assert run_cli("log", "verify", state=state_home).returncode == 0  # a shorter chain is a valid chain
    done = run_cli("log", "verify", "--head", str(head), state=state_home)
    assert_user_error(done, 65, "the log ends at decision #2 but the head file recorded #3: 1 row(s) removed "
                                "from the end", "the log ends at outcome #2")


def test_a_head_file_that_is_not_one_is_refused(state_home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "head.json"
    bad.write_text('{"decisions": {"id": 1}}')
    assert_user_error(run_cli("log", "verify", "--head", str(bad), state=state_home), 65,
                      f"{bad} is not a chain head file")
    assert_user_error(run_cli("log", "verify", "--head", str(tmp_path / "nope"), state=state_home), 4,
                      "no chain head file at")


def test_export_writes_one_verifiable_json_line_per_decision(logged: int, state_home: Path, tmp_path: Path) -> None:
    done = run_cli("log", "export", "rc", state=state_home)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == logged and [row["id"] for row in lines] == sorted(row["id"] for row in lines)
    for row in lines:  # each row's hash recomputes from the exported line alone
        assert row["campaign"] == "rc" and len(row["prev_hash"]) == len(row["row_hash"]) == 64
        assert row_hash(row["prev_hash"], DECISION_FIELDS, [row[f] for f, _ in DECISION_FIELDS]) == row["row_hash"]
        outcome = row["outcome"]
        assert row_hash(outcome["prev_hash"], OUTCOME_FIELDS, [outcome[f] for f, _ in OUTCOME_FIELDS]) \
            == outcome["row_hash"]

    target = tmp_path / "rc.jsonl"
    done = run_cli("log", "export", "rc", "--format", "jsonl", "--output", str(target), "--json", state=state_home)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"] == {"format": "jsonl", "decisions": logged, "output": str(target)}
    assert target.read_text().splitlines() == [json.dumps(row, ensure_ascii=False) for row in lines]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_export_refuses_an_unknown_format_naming_the_allowed_ones(state_home: Path) -> None:
    done = run_cli("log", "export", "rc", "--format", "csv", state=state_home)
    assert done.returncode == 2 and "'csv' is not an export format; use one of: jsonl" in done.stderr
    assert "Traceback" not in done.stderr


def test_export_to_a_missing_directory_is_a_state_error(logged: int, state_home: Path, tmp_path: Path) -> None:
    done = run_cli("log", "export", "rc", "--output", str(tmp_path / "no" / "x.jsonl"), state=state_home)
    assert_user_error(done, 73, "cannot write", "x.jsonl")
    assert not (tmp_path / "no").exists()


def test_log_name_still_shows_the_log_and_equals_log_show(logged: int, state_home: Path) -> None:
    short = run_cli("log", "rc", "--last", "2", state=state_home)
    assert short.returncode == 0, short.stderr
    assert f"#{logged} " in short.stdout and f"#{logged - 2} " not in short.stdout
    assert run_cli("log", "show", "rc", "--last", "2", state=state_home).stdout == short.stdout
    flags_first = run_cli("log", "--last", "2", "rc", state=state_home)
    assert flags_first.returncode == 0 and flags_first.stdout == short.stdout



# Edits that the old verifier missed or died on: it cast every integer column with int() before
# hashing, so 3 → 3.5 hashed as 3, and text in an integer column raised ValueError (exit 1).
# SQLite's columns take a value of any type; PostgreSQL's refuse one of another type.
SQLITE_TYPING = pytest.mark.sqlite_only(reason="a value of another type than its column's: SQLite's dynamic typing")


@pytest.mark.parametrize(("tables", "sql", "named"), [
    pytest.param("decisions", "UPDATE decisions SET task_index = task_index + 0.5 WHERE id=3;",
                 "decision #3: task_index holds a real number", marks=SQLITE_TYPING, id="real-in-integer"),
    pytest.param("decisions", "UPDATE decisions SET tick_id = 'one' WHERE id=2;", "decision #2: tick_id holds text",
                 marks=SQLITE_TYPING, id="text-in-integer"),
    pytest.param("decisions", "UPDATE decisions SET reason = CAST(x'ff41' AS TEXT) WHERE id=2;",
                 "decision #2: reason holds text that is not valid UTF-8", marks=SQLITE_TYPING, id="invalid-utf8"),
    pytest.param("decision_outcomes", "UPDATE decision_outcomes SET error = x'41' WHERE id=1;",
                 "outcome #1: error holds bytes", marks=SQLITE_TYPING, id="blob-in-text"),
    pytest.param("", "DROP TABLE decision_outcomes;", "the decision_outcomes table is missing", id="dropped-table"),
])
def test_a_value_of_the_wrong_type_or_a_dropped_table_is_named_and_exits_65(
        logged: int, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tables: str, sql: str,
        named: str) -> None:
    head = tmp_path / "head.json"
    monkeypatch.setenv("CAMPAIGNCTL_CHAIN_HEAD", str(head))
    assert run_cli("log", "verify", state=state_home).returncode == 0
    from campaignctl.adapters.decision_chain import write_head_file
    write_head_file(Store.open().engine, head)
    tamper(state_home, sql, *tables.split())
    for args in ((), ("--head", str(head))):
        assert_user_error(run_cli("log", "verify", *args, state=state_home), 65, named)


def test_well_typed_rows_hash_exactly_as_before(logged: int) -> None:
    """The change to hashing values as stored keeps every chain written before it valid: for a
    value of the column's own type, the old cast was the identity. Pinned on one row's digest."""
    row = (1, 2, 3, 4, "tok", "default", "d", "oom", "resubmit", "{}", "{}", "why", "enforce", "g", "t", 1, "")
    assert row_hash("0" * 64, DECISION_FIELDS, row) == (
        "003af131b17db0dabed73c3791dfa1bbb4f779028f046dd6230b0745330c33da")
