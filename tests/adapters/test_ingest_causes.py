"""Reconcile's read of exit.json: only attempts that turned FAILED this tick, one file each."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from campaignctl.adapters import slurm
from campaignctl.adapters.exit_status import read_cause
from campaignctl.core.model.records import AttemptFacts, HistoryRow, ObservedChange
from campaignctl.services.causes import ingest_causes, settle_exit_codes


def row(attempt_id: int, state: str) -> HistoryRow:
    return HistoryRow(attempt_id, attempt_id, 1, 0, f"tok{attempt_id}.0", f"{attempt_id}_0", state, state, None,
                      "node1", 10, "", None, None, "{}", f"tok{attempt_id}", "released", "2026-11-24T00:00:00")


def change(attempt_id: int, state: str) -> ObservedChange:
    return ObservedChange(attempt_id, AttemptFacts(state, state, 1, "node1", 10, "", "2026-11-24T00:01:00"), True)


def exit_json(run_dir: Path, attempt_id: int, cause: str | None) -> None:
    path = run_dir / "tasks" / str(attempt_id) / f"tok{attempt_id}.0" / "exit.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"returncode": 1, "cause": cause, "evidence": f"line of {attempt_id}"}))


def test_only_attempts_turning_failed_are_read(tmp_path: Path) -> None:
    for i, cause in ((1, "gpu_out_of_memory"), (2, "gpu_out_of_memory"), (3, "gpu_out_of_memory"), (4, None)):
        exit_json(tmp_path, i, cause)
    rows = [row(1, "RUNNING"), row(2, "FAILED"), row(3, "RUNNING"), row(4, "RUNNING"), row(5, "RUNNING")]
    changes = [change(1, "FAILED"), change(2, "FAILED"), change(3, "COMPLETED"), change(4, "FAILED"),
               change(5, "FAILED")]  # 2 was FAILED already, 3 completed, 4 named nothing, 5 has no file
    assert ingest_causes(None, str(tmp_path), rows, changes) == {1: ("gpu_out_of_memory", "line of 1")}


def test_a_torn_or_foreign_exit_json_is_no_cause(tmp_path: Path) -> None:
    path = tmp_path / "exit.json"
    path.write_text('{"returncode": 1, "cau')
    assert read_cause(path) is None
    path.write_text('["not", "a", "mapping"]')
    assert read_cause(path) is None
    path.write_text(json.dumps({"cause": "setup_failed", "evidence": "x" * 10_000}))
    assert read_cause(path) == ("setup_failed", "x" * 4096)


def test_a_failed_attempt_read_again_while_its_retry_waits_keeps_the_143_settled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Slurm 22.05 prints a TERM-killed job's 143 as `15:0`; the runner's exit.json (returncode -15)
    # settles it as 143 at the tick that sees FAILED. A retry of 143 with a backoff waits, so the
    # next tick reads the attempt again, and sacct says 15 again: it stays 143. (CI run 56, 22.05:
    # task 1 of tests/integration/test_slurm_boundary_real.py's SIGTERM test was stored with 15,
    # its exit.json saying -15, and the retry rule gave it up.)
    monkeypatch.setattr(slurm, "version", lambda: None)  # a Slurm before 25.11: 143 printed as 15
    path = tmp_path / "tasks" / "1" / "tok1.0" / "exit.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"returncode": -15}))
    sacct_says = ObservedChange(1, AttemptFacts("FAILED", "FAILED", 15, "node1", 10, "", "2026-11-24T00:01:00"), True)
    (first,) = settle_exit_codes(str(tmp_path), [row(1, "RUNNING")], [sacct_says])
    assert first.facts.exit_code == 143
    stored = replace(row(1, "FAILED"), exit_code=143)
    (again,) = settle_exit_codes(str(tmp_path), [stored], [sacct_says])
    assert again.facts.exit_code == 143
    path.unlink()  # kept from the store, not read again
    (later,) = settle_exit_codes(str(tmp_path), [stored], [sacct_says])
    assert later.facts.exit_code == 143
