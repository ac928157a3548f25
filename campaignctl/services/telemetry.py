"""Ingest the telemetry that running (and just-ended) attempts appended since the last tick."""

from __future__ import annotations

import os
from collections.abc import Sequence

from campaignctl.adapters.paths import task_dir
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import Position, read_new_lines
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.core.records import HistoryRow, ObservedChange
from campaignctl.core.telemetry import Summary, fold

TELEMETRY_FILE = "telemetry.jsonl"


def ingest(store: Store, run_dir: str, rows: Sequence[HistoryRow],
           changes: Sequence[ObservedChange]) -> dict[str, Summary]:
    """Read new lines of every attempt that is RUNNING or changed state this tick; returns the
    summaries of those attempts by token (what utilisation rules read). One stat+read per such
    attempt, nothing for settled ones."""
    changed = {c.attempt_id: c for c in changes}
    tasks = str(task_dir(run_dir, 0).parent)  # strings, not Path objects: 100,000 per tick
    paths = {r.id: f"{tasks}/{r.task_index}/{r.token}/{TELEMETRY_FILE}"
             for r in rows if r.id in changed or r.state == "RUNNING"}
    present = [i for i, path in paths.items() if os.path.exists(path)]  # no sampler, no file
    if not present:
        return {}
    telemetry = TelemetryStore(store.engine)
    known = telemetry.load(present)
    token = {r.id: r.token for r in rows}
    updates, summaries = [], {}
    for attempt_id in present:
        position, summary = known.get(attempt_id, (Position(), Summary()))
        lines, moved = read_new_lines(paths[attempt_id], position)
        if moved != position:
            summary = fold(summary, lines)
            updates.append((attempt_id, moved, summary))
        summaries[token[attempt_id]] = summary
    telemetry.save(updates)
    return summaries
