"""The tick's rules beyond per-cause retries, for one campaign: utilisation (from ingested
telemetry), GPU-type fallback (one squeue and one sinfo, only when a task has waited long
enough), early stopping (one query of the metric's points, only when a task runs that it could
stop), and the budget guard (one GROUP BY over the campaign's attempts)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from campaignctl.adapters import slurm
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.adapters.store import Store
from campaignctl.core import fallback
from campaignctl.core.budget import BudgetPlan, assess, guard
from campaignctl.core.clock import read_time
from campaignctl.core.cost import campaign_spend
from campaignctl.core.decide import Decision, TaskView
from campaignctl.core.early_stop import decide_early_stops, stoppable
from campaignctl.core.ladder import rung_of
from campaignctl.core.policy import Policy, policy_from_dict
from campaignctl.core.records import CampaignRecord, HistoryRow
from campaignctl.core.requests import STANDING_ACTIONS, LoggedRequest, Requests, standing_requests
from campaignctl.core.spec import Budget
from campaignctl.core.telemetry import Summary
from campaignctl.core.utilisation import decide_utilisation


@dataclass(frozen=True, slots=True)
class CampaignContext:
    store: Store
    log: DecisionLog
    record: CampaignRecord
    policy: Policy
    settings: Mapping[str, Any]
    now: datetime  # UTC (core/clock.py)
    queued: Callable[[], list[slurm.QueuedJob]]  # the tick's one squeue, on demand


def current_policy(store: Store, record: CampaignRecord) -> tuple[Policy, dict[str, Any]]:
    """The policy and settings stored with the current revision (no YAML read on a tick)."""
    revision = store.revision(record.id, record.current_revision)
    return policy_from_dict(json.loads(revision.policy_json)), json.loads(revision.settings_json)


def requests_of(log: DecisionLog, campaign_id: int) -> Requests:
    return standing_requests(
        LoggedRequest(e.task_index, e.attempt_token, e.rule, e.action, e.params, e.reason, e.status)
        for e in log.entries(campaign_id, actions=STANDING_ACTIONS))


def budget_of(settings: Mapping[str, Any]) -> Budget:
    return Budget(**settings.get("budget") or {})


def utilisation_and_fallback(ctx: CampaignContext, views: Sequence[TaskView], rows: Sequence[HistoryRow],
                             summaries: Mapping[str, Summary], requests: Requests) -> list[Decision]:
    decisions = decide_utilisation(views, summaries, ctx.policy, int(ctx.settings.get("min_gpus") or 0),
                                   requests.fired)
    gpu_types = list(ctx.settings.get("gpu_types") or [])
    since = {r.token: read_time(r.created_at) for r in rows if r.state in ("PENDING", "SUBMITTING")}
    waiting = fallback.candidates(views, gpu_types, ctx.policy, ctx.now, since, requests.moves,
                                  requests.cancel_requested)
    if waiting:
        reasons = {q.job_id: q.reason for q in ctx.queued()}
        free = fallback.free_gpus_by_type(slurm.gpu_nodes())
        decisions += fallback.plan_fallbacks(waiting, gpu_types, ctx.policy, reasons, free)
    return decisions


def early_stops(ctx: CampaignContext, views: Sequence[TaskView], fired: set[tuple[str, str]],
                policy: Policy | None = None) -> list[Decision]:
    """Median-rule stops of `policy` (the enforced one unless given, e.g. a candidate)."""
    section = (policy or ctx.policy).early_stopping
    running = stoppable(views, fired) if section.enabled else []
    if not running:
        return []
    curves = MetricsStore(ctx.store.engine).curves(ctx.record.id, section.metric)
    rungs = {task: rung_of(task, ctx.settings) for task in curves}
    return decide_early_stops(running, curves, rungs, section, fired)


def budget_plan(ctx: CampaignContext, views: Sequence[TaskView]) -> BudgetPlan:
    budget = budget_of(ctx.settings)
    if not budget.limits():
        return BudgetPlan()
    assessment = assess(budget, campaign_spend(ctx.store.usage_groups(ctx.record.id), ctx.policy.prices))
    entries = ctx.log.entries(ctx.record.id, actions=("alert", "release"))
    alerted = {str(e.params.get("key")) for e in entries if e.action == "alert"}
    # `resume --force` released work over these very limits: do not hold it again until they change
    forced = any(e.params.get("limits") == budget.limits() for e in entries if e.action == "release")
    return guard(budget, assessment, views, ctx.record.state == "paused" or forced, alerted)

