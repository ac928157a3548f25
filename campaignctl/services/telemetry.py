"""Ingest the telemetry that running (and just-ended) attempts appended since the last tick."""

from __future__ import annotations

from collections.abc import Sequence

from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import Position, files_to_read, read_new_lines
from campaignctl.core.model.attempt_paths import TELEMETRY, tasks_dir
from campaignctl.core.model.records import HistoryRow, ObservedChange
from campaignctl.core.usage.telemetry import Summary, fold


def ingest_telemetry(store: Store, campaign_id: int, run_dir: str, rows: Sequence[HistoryRow],
                     changes: Sequence[ObservedChange]) -> dict[str, Summary]:
    """Read new lines of every attempt that is RUNNING or changed state this tick; returns the
    summaries of those attempts by token (what utilisation rules read). One stat+read per such
    attempt, nothing for settled ones."""
    telemetry = store.telemetry
    behind = telemetry.behind(campaign_id)  # ended with more than a tick's read cap unread
    paths = files_to_read(str(tasks_dir(run_dir)), rows, {c.attempt_id for c in changes},
                          TELEMETRY, behind)  # no sampler, no file
    present = list(paths)
    if not present:
        return {}
    known = telemetry.load(present)
    token = {**{i: t for i, (_, t) in behind.items()}, **{r.id: r.token for r in rows}}
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
