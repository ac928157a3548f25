"""What a tick reads beside sacct, in one step: the files each changed or running attempt's job
wrote (exit.json, telemetry.jsonl, metrics.jsonl; core/model/attempt_paths.py) and the observations
recorded. The tick shell calls it once per campaign."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from campaignctl.adapters.store import Store
from campaignctl.core.model.records import HistoryRow, ObservedChange
from campaignctl.core.usage.telemetry import Summary
from campaignctl.services.causes import ingest_causes, settle_exit_codes
from campaignctl.services.telemetry import ingest_telemetry
from campaignctl.services.training_metrics import ingest_metrics


@dataclass(frozen=True, slots=True)
class Ingested:
    changes: list[ObservedChange]  # sacct's, a signal-sized exit code settled by the runner's exit.json
    causes: dict[int, tuple[str, str]]  # attempt id → (cause, evidence) named from its exit files
    summaries: dict[str, Summary]  # attempt token → telemetry, of the attempts read this tick


def ingest(store: Store | None, tick_id: int | None, campaign_id: int, run_dir: str, rows: Sequence[HistoryRow],
           changes: Sequence[ObservedChange]) -> Ingested:
    """`store` None (a dry run): exit codes and causes are read, nothing is written, telemetry and
    metrics are left for the next tick that acts."""
    if tick_id is None:
        store = None  # no tick to record under: read only
    settled = settle_exit_codes(run_dir, rows, changes)
    causes = ingest_causes(store, run_dir, rows, settled)
    if store is None or tick_id is None:
        return Ingested(settled, causes, {})
    store.record_observations(tick_id, settled)
    summaries = ingest_telemetry(store, campaign_id, run_dir, rows, settled)
    ingest_metrics(store, campaign_id, run_dir, rows, settled)
    return Ingested(settled, causes, summaries)
