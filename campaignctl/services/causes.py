"""Causes named by the program's output, read for attempts sacct shows FAILED this tick."""

from __future__ import annotations

from collections.abc import Sequence

from campaignctl.adapters.exit_status import read_cause
from campaignctl.adapters.paths import task_dir
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import task_dirs
from campaignctl.core.records import HistoryRow, ObservedChange

EXIT_FILE = "exit.json"


def ingest_causes(store: Store | None, run_dir: str, rows: Sequence[HistoryRow],
                  changes: Sequence[ObservedChange]) -> dict[int, tuple[str, str]]:
    """(cause, evidence) by attempt id, stored with the attempt (not with `store` None: a dry
    run). One small read per attempt that turned FAILED this tick; nothing for any other (a
    cause only refines FAILED)."""
    by_id = {r.id: r for r in rows}
    causes = {}
    started: set[str] | None = None
    for change in changes:
        row = by_id.get(change.attempt_id)
        if change.state != "FAILED" or row is None or row.state == "FAILED":
            continue
        if started is None:
            started = task_dirs(str(task_dir(run_dir, 0).parent))
        if str(row.task_index) not in started:
            continue  # no directory, no exit.json: one listing, not an open per failed attempt
        found = read_cause(task_dir(run_dir, row.task_index) / row.token / EXIT_FILE)
        if found is not None:
            causes[row.id] = found
    if store is not None:
        store.set_attempt_causes(causes)
    return causes
