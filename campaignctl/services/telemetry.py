"""Ingest the telemetry that running (and just-ended) attempts appended since the last tick."""

from __future__ import annotations

from collections.abc import Sequence

from campaignctl.adapters.paths import task_dir
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import Position, read_new_lines
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.core.records import HistoryRow, ObservedChange
from campaignctl.core.telemetry import Summary, fold

TELEMETRY_FILE = "telemetry.jsonl"


def ingest(store: Store, run_dir: str, rows: Sequence[HistoryRow], changes: Sequence[ObservedChange]) -> int:
    """Read new lines of every attempt that is RUNNING or changed state this tick; returns how
    many attempts' summaries grew. One stat+read per such attempt, nothing for settled ones."""
    changed = {c.attempt_id: c for c in changes}
    targets = [r for r in rows if r.id in changed or r.state == "RUNNING"]
    if not targets:
        return 0
    telemetry = TelemetryStore(store.engine)
    known = telemetry.load([r.id for r in targets])
    updates = []
    for row in targets:
        position, summary = known.get(row.id, (Position(), Summary()))
        path = str(task_dir(run_dir, row.task_index) / row.token / TELEMETRY_FILE)
        lines, moved = read_new_lines(path, position)
        if moved != position:
            updates.append((row.id, moved, fold(summary, lines)))
    telemetry.save(updates)
    return len(updates)
