"""Reconcile's read of exit.json: only attempts that turned FAILED this tick, one file each."""

from __future__ import annotations

import json
from pathlib import Path

from campaignctl.adapters.exit_status import read_cause
from campaignctl.core.model.records import AttemptFacts, HistoryRow, ObservedChange
from campaignctl.services.causes import ingest_causes


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
