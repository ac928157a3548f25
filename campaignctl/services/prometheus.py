"""`metrics`: every campaign (or one) as Prometheus metrics, from the store only (no Slurm call):
the state the last reconcile tick left. Written for node_exporter's textfile collector, or printed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from campaignctl.adapters.paths import write_public
from campaignctl.adapters.report_queries import ReportQueries
from campaignctl.adapters.store import Store
from campaignctl.core.base.clock import epoch
from campaignctl.core.base.errors import OutputError
from campaignctl.core.model.records import CampaignRecord
from campaignctl.core.screens.prometheus import CampaignSnapshot, campaign_families, exposition, recent_use
from campaignctl.core.screens.status import stored_states
from campaignctl.core.tick.budget import assess
from campaignctl.core.usage.cost import campaign_spend
from campaignctl.services.campaigns import current_policy, find_campaigns, unstarted_labels
from campaignctl.services.ticks import tick_health


@dataclass(frozen=True, slots=True)
class MetricsExport:
    text: str  # the exposition
    campaigns: list[str]
    samples: int
    textfile: str | None = None  # where it was written, if it was

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def export_metrics(name: str | None = None, textfile: Path | None = None) -> MetricsExport:
    store = Store.open()
    records = find_campaigns(store, name)
    queries = ReportQueries(store.engine)
    last = queries.last_tick_at()
    families = campaign_families([snapshot(store, queries, r) for r in records], epoch(last) if last else None,
                                 tick_health(store) if records or last else None)  # nothing yet: nothing to say
    text = exposition(families)
    if textfile is not None:
        write_textfile(textfile, text)
    return MetricsExport(text, [r.name for r in records], sum(len(f.samples) for f in families),
                         None if textfile is None else str(textfile))


def snapshot(store: Store, queries: ReportQueries, record: CampaignRecord) -> CampaignSnapshot:
    policy, settings = current_policy(store, record)
    attempts = store.attempts(record.id)
    spend = campaign_spend(store.usage.groups(record.id), policy.prices)
    budget = settings.budget
    latest = {a.task_index: a.state for a in attempts}  # ordered by task, then attempt
    running = {t for t, state in latest.items() if state == "RUNNING"}
    usage = {t: recent_use(s.window(policy.utilisation.window_s))
             for t, s in store.telemetry.by_task(record.id).items() if t in running and s.recent}
    return CampaignSnapshot(
        record.name, record.state,
        stored_states(store.task_params(record.id), attempts,
                      unstarted_labels(store.log, record.id, settings)), len(attempts),
        {"spent": asdict(spend.spent), "committed": asdict(spend.committed), "projected": asdict(spend.projected)},
        budget.limits(), bool(budget.limits()) and assess(budget, spend).exhausted,
        queries.decision_counts(record.id),
        {t: gpu for t, (gpu, _) in usage.items() if gpu is not None}, {t: cpu for t, (_, cpu) in usage.items()})


def write_textfile(path: Path, text: str) -> None:
    """Temp file in the same directory, mode 0644, then rename: node_exporter never reads half a file."""
    try:
        write_public(path, text.encode())
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}",
                          "point --textfile into node_exporter's --collector.textfile.directory, "
                          "a directory you can write to") from None
