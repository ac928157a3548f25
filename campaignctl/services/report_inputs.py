"""Everything the report draws, read from the store and the run directory (no Slurm call):
attempt times, full telemetry files, metrics, decisions, spend."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from campaignctl.adapters.decision_log import LoggedDecision
from campaignctl.adapters.report_queries import AttemptTimes, ReportQueries
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import node_files, read_tail_lines
from campaignctl.core.base.clock import epoch
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.model.attempt_paths import TELEMETRY, AttemptPaths, file_in, tasks_dir
from campaignctl.core.model.params import Scalar
from campaignctl.core.model.records import CampaignRecord
from campaignctl.core.policy.policy import Policy
from campaignctl.core.screens.report_series import AttemptSamples, MetricRow, RunCost
from campaignctl.core.screens.timeline import DecisionPoint, Span, TimelineFacts, span_of
from campaignctl.core.slurm.observe import resources_parser
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.usage.cost import Amount, Spend, campaign_spend, hourly
from campaignctl.core.usage.efficiency import Efficiency, campaign_efficiency, memo
from campaignctl.core.usage.node_telemetry import NodeLine, node_line
from campaignctl.core.usage.telemetry import Sample, samples_of
from campaignctl.services.campaigns import current_policy
from campaignctl.services.usage import attempt_usage, by_cluster, task_efficiencies


@dataclass(frozen=True, slots=True)
class ReportInputs:
    record: CampaignRecord
    settings: CampaignSettings
    policy: Policy
    now: float
    params: dict[int, dict[str, Scalar]]
    spans: list[Span]
    runs: list[RunCost]
    samples: list[AttemptSamples]
    sampled_from: dict[str, int]  # files | summaries → how many attempts' samples came from each
    metric_rows: list[MetricRow]
    decisions: list[LoggedDecision]
    spend: Spend
    efficiency: dict[int, Efficiency]  # per task: its latest attempt's, GPU-hours and cost of all
    campaign_efficiency: Efficiency
    nodes: dict[int, str] = field(default_factory=dict)  # per task: its latest attempt's node list
    node_lines: list[NodeLine] = field(default_factory=list)  # multi-node attempts: one per node
    cluster_spend: dict[str, Spend] = field(default_factory=dict)  # `clusters:`: what each cluster's attempts spent

    @property
    def points(self) -> list[DecisionPoint]:
        return [DecisionPoint(epoch(e.created_at), e.task_index, e.rule, e.action, e.status, e.mode == "shadow")
                for e in self.decisions]


def gather(store: Store, record: CampaignRecord, now: float) -> ReportInputs:
    policy, settings = current_policy(store, record)
    queries = ReportQueries(store.engine)
    usage = attempt_usage(store, record.id)
    of = memo(policy.prices)  # each attempt's figures once, for its task and for the campaign
    attempts = [u.times for u in usage]
    samples, sources = _samples(store, record.run_dir, attempts)
    first_seen = queries.first_seen(record.id)
    spans = [span_of(_facts(a, first_seen.get(a.id, {}), samples.get(a.id, ()))) for a in attempts]
    rates = _rates(attempts, policy)
    return ReportInputs(
        record, settings, policy, now, store.task_params(record.id), spans,
        [RunCost(s.started, s.ended, rates[a.id]) for a, s in zip(attempts, spans, strict=True)
         if s.started is not None],
        [AttemptSamples(a.task_index, max(1, int(rates[a.id].cpu_hours)), samples[a.id])
         for a in attempts if samples.get(a.id)],
        sources, store.metrics.rows(record.id), store.log.entries(record.id),
        campaign_spend(store.usage.groups(record.id), policy.prices),
        task_efficiencies(usage, policy.prices, of), campaign_efficiency([u.use for u in usage], policy.prices, of),
        {a.task_index: a.nodes or "" for a in attempts}, _node_lines(record.run_dir, attempts),
        {c: campaign_spend(groups, policy.prices) for c, groups in by_cluster(
            store.usage.groups_by_cluster(record.id), [c.name for c in settings.clusters]).items()}
        if settings.clusters else {})


def _node_lines(run_dir: str, attempts: list[AttemptTimes]) -> list[NodeLine]:
    """Each node's sampler file of every multi-node attempt still on disk, first node first."""
    out = []
    for a in attempts:
        if len(split_nodes(a.nodes or "")) > 1:
            files = node_files(str(AttemptPaths.of(run_dir, a.task_index, a.token).folder), TELEMETRY)
            out += [node_line(a.task_index, a.attempt_number, read_tail_lines(path)) for path in files]
    return out


def _facts(a: AttemptTimes, seen: Mapping[str, str], samples: tuple[Sample, ...]) -> TimelineFacts:
    return TimelineFacts(a.task_index, a.attempt_number, a.state, epoch(a.created_at),
                        epoch(a.ended_at) if a.ended_at else None, a.elapsed_s,
                        {state: epoch(at) for state, at in seen.items()}, samples[0].t if samples else None)


def _rates(attempts: list[AttemptTimes], policy: Policy) -> dict[int, Amount]:
    """What one hour of each attempt costs (allocated TRES once Slurm reported them)."""
    parse = resources_parser()
    return {a.id: hourly(parse(a.resources_json), a.alloc_tres, policy.prices) for a in attempts}


def _samples(store: Store, run_dir: str, attempts: list[AttemptTimes]
             ) -> tuple[dict[int, tuple[Sample, ...]], dict[str, int]]:
    """Each attempt's samples from its whole telemetry.jsonl; where the file cannot be read from
    here (another machine's scratch, cleaned up), the last samples reconcile kept in the store."""
    tasks = str(tasks_dir(run_dir))
    out: dict[int, tuple[Sample, ...]] = {}
    for a in attempts:
        path = file_in(tasks, a.task_index, a.token, TELEMETRY)
        if os.path.exists(path):
            out[a.id] = samples_of(read_tail_lines(path))
    missing = [a.id for a in attempts if a.id not in out]
    kept = store.telemetry.load(missing) if missing else {}
    out.update({i: summary.recent for i, (_, summary) in kept.items() if summary.recent})
    return out, {"files": len(attempts) - len(missing), "summaries": sum(1 for i in missing if i in out)}
