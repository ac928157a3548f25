"""`results`: one row per config with its final and best metric, the winner first, and what each
used; from the store only (the last tick's states, ingested metrics, telemetry; no Slurm call)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from campaignctl.adapters import slurm
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import InputError
from campaignctl.core.model.records import CampaignRecord
from campaignctl.core.model.training_metrics import MODES, curves_by_task
from campaignctl.core.packing.pack_fates import shared_label, sharing
from campaignctl.core.screens.report_series import metric_names
from campaignctl.core.screens.results import (
    BY,
    ConfigResult,
    Objective,
    TaskFacts,
    config_results,
    objective_of,
    plain_row,
)
from campaignctl.core.screens.status import NOT_SUBMITTED
from campaignctl.core.slurm import job_ref
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.usage.efficiency import Efficiency, campaign_efficiency, memo
from campaignctl.services.campaigns import current_policy, find_campaign, unstarted_labels
from campaignctl.services.metric_warnings import unmatched_pattern_warnings
from campaignctl.services.usage import AttemptUsage, attempt_usage, by_task

ASSUMED_GOAL = "assumed; --goal max if higher is better"


@dataclass(frozen=True, slots=True)
class ResultsResult:
    campaign: str
    metric: str | None  # None: no task reported any metric yet
    goal: str
    goal_source: str  # the spec key it came from, --goal, or ASSUMED_GOAL
    by: str
    metrics: list[str]  # every metric the tasks reported
    configs: list[ConfigResult]
    efficiency: Efficiency  # the campaign's, over every attempt that ran
    warnings: list[str] = field(default_factory=list)  # metrics.from_output patterns that matched nothing

    def rows(self) -> list[dict[str, object]]:
        """Plain rows, the winner first: `pandas.DataFrame(result.rows())`."""
        return [plain_row(c, self.metric) for c in self.configs]

    def to_dict(self) -> dict[str, object]:
        """What `results --json` prints: everything the table and its summary lines show."""
        winner = next((c.config for c in self.configs if c.rank == 1), None)
        return {"campaign": self.campaign, "metric": self.metric, "goal": self.goal,
                "goal_source": self.goal_source, "by": self.by, "metrics": self.metrics, "winner": winner,
                "efficiency": self.efficiency.to_dict(), "rows": self.rows(), "warnings": self.warnings}


def results(name: str, metric: str | None = None, by: str = "last", goal: str | None = None) -> ResultsResult:
    if by not in BY or (goal is not None and goal not in MODES):
        raise InputError(f"--by takes {' or '.join(BY)} and --goal {' or '.join(MODES)}", "e.g. --by best --goal max")
    store = Store.open()
    record = find_campaign(store, name)
    policy, settings = current_policy(store, record)
    reported = store.metrics.rows(record.id)
    names = metric_names(reported)
    objective = objective_of(settings, policy)
    chosen = choose_metric(metric, objective, names)
    goal, source = (goal, "--goal") if goal else (
        (objective.goal, objective.source) if objective and objective.metric == chosen else ("min", ASSUMED_GOAL))
    curves = curves_by_task(((t, s, n, v) for t, _, s, n, v, _ in reported), chosen) if chosen else {}
    usage, params = attempt_usage(store, record.id), store.task_params(record.id)
    of = memo(policy.prices)  # each attempt's figures once, for its config and for the campaign
    configs = config_results(settings, params, _task_facts(store, record, settings, usage, params),
                             curves, goal, by, policy.prices, of)
    return ResultsResult(record.name, chosen, goal, source, by, names, configs,
                         campaign_efficiency([u.use for u in usage], policy.prices, of),
                         unmatched_pattern_warnings(store, record))


def choose_metric(asked: str | None, objective: Objective | None, reported: Sequence[str]) -> str | None:
    """The metric asked for, else the objective's, else the only one reported. An unknown name,
    or a choice among several, is the user's to make (exit 3, naming the known ones)."""
    known = list(dict.fromkeys([*([objective.metric] if objective else []), *reported]))
    if asked is not None and asked not in known:
        raise InputError(f"no task reported a metric named {asked!r}",
                         f"known metrics: {', '.join(known)}" if known else "no task reported any metric yet")
    if asked is not None or objective is not None:
        return asked or (objective.metric if objective else None)
    if len(reported) > 1:
        raise InputError(f"the tasks reported {len(reported)} metrics and the spec names no objective",
                         f"choose one with --metric: {', '.join(reported)}; or name it in the spec, "
                         f"`objective: {{metric: {reported[0]}, goal: min}}`, and submit it again")
    return reported[0] if reported else None


def _task_facts(store: Store, record: CampaignRecord, settings: CampaignSettings,
                usage: Sequence[AttemptUsage], params: Iterable[int]) -> dict[int, TaskFacts]:
    """Every task: its latest attempt's state and its attempts; one never started is NOT_SUBMITTED,
    or NOT_PROMOTED when its rung did not keep its config."""
    uses = by_task(usage)
    latest = {u.times.task_index: u.times for u in usage}  # ordered by attempt: the last wins
    label = unstarted_labels(store.log, record.id, settings)
    counts = sharing((t.job_id, t.packed) for t in latest.values())
    shared = {task: shared_label(t.job_id, counts[t.job_id or ""]) for task, t in latest.items()}
    default = slurm.cluster_name() if settings.clusters else ""  # a plain job id is on it (core/slurm/job_ref.py)
    cluster = {task: (job_ref.cluster_of(t.job_id) or default) if default and t.job_id else ""
               for task, t in latest.items()}
    return {task: TaskFacts(latest[task].state, len(uses[task]), uses[task], shared.get(task, ""), cluster[task])
            if task in uses else TaskFacts(label(task) or NOT_SUBMITTED, 0) for task in params}
