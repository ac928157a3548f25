"""Ingest the metrics that running (and just-ended) attempts appended since the last tick."""

from __future__ import annotations

from collections.abc import Sequence

from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import Position, files_to_read, read_new_lines
from campaignctl.core.model.attempt_paths import METRICS, tasks_dir
from campaignctl.core.model.records import HistoryRow, ObservedChange
from campaignctl.core.model.training_metrics import parse_metric_lines


def ingest_metrics(store: Store, campaign_id: int, run_dir: str, rows: Sequence[HistoryRow],
                   changes: Sequence[ObservedChange]) -> int:
    """Read new lines of every attempt that is RUNNING or changed state this tick (the final
    lines of one that just ended too) or that a tick's read cap left behind; returns how many
    points were added."""
    metrics = store.metrics
    paths = files_to_read(str(tasks_dir(run_dir)), rows, {c.attempt_id for c in changes}, METRICS,
                          metrics.behind(campaign_id))
    present = list(paths)
    if not present:
        return 0
    known = metrics.positions(present)
    updates = []
    for attempt_id in present:
        position, bad = known.get(attempt_id, (Position(), 0))
        lines, moved = read_new_lines(paths[attempt_id], position)
        if moved != position:
            parsed = parse_metric_lines(lines)
            updates.append((attempt_id, moved, bad + parsed.bad_lines, parsed.points))
    metrics.append(updates)
    return sum(len(u[3]) for u in updates)
