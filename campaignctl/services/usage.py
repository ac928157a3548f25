"""What each attempt of a campaign used, as the store has it (the last tick's sacct facts and
telemetry summaries; no Slurm call): the input of every efficiency figure (core/usage/efficiency.py)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from campaignctl.adapters import slurm
from campaignctl.adapters.report_queries import AttemptTimes, ReportQueries
from campaignctl.adapters.store import Store
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.observe import resources_parser
from campaignctl.core.usage.cost import UsageGroup
from campaignctl.core.usage.efficiency import AttemptUse, Efficiency, task_efficiency


@dataclass(frozen=True, slots=True)
class AttemptUsage:
    times: AttemptTimes
    use: AttemptUse


def attempt_usage(store: Store, campaign_id: int, only: Collection[int] | None = None) -> list[AttemptUsage]:
    """Every attempt of the campaign (of tasks `only`, when given), by task then attempt number."""
    attempts = [a for a in ReportQueries(store.engine).attempts(campaign_id, only)
                if only is None or a.task_index in only]
    summaries = store.telemetry.load([a.id for a in attempts])
    parse = resources_parser()
    return [AttemptUsage(a, AttemptUse(a.state, a.elapsed_s, parse(a.resources_json), a.alloc_tres, a.max_rss,
                                       summaries[a.id][1] if a.id in summaries else None, a.consumed_energy_j))
            for a in attempts]


def by_task(usage: Sequence[AttemptUsage]) -> dict[int, list[AttemptUse]]:
    out: dict[int, list[AttemptUse]] = {}
    for u in usage:
        out.setdefault(u.times.task_index, []).append(u.use)
    return out


def task_efficiencies(usage: Sequence[AttemptUsage], prices: Prices,
                      of: Callable[[AttemptUse], Efficiency] | None = None) -> dict[int, Efficiency]:
    """Each task's efficiency; `of`: each attempt's (efficiency.memo, shared with the campaign's figure)."""
    return {task: task_efficiency(uses, prices, of) for task, uses in by_task(usage).items()}


def by_cluster(groups: Iterable[tuple[str, UsageGroup]], clusters: Sequence[str]) -> dict[str, list[UsageGroup]]:
    """Usage groups, each with the cluster it ran on ('' the default: the one SLURM_CONF names),
    by cluster name, every cluster of `clusters` listed."""
    default = slurm.cluster_name()
    out: dict[str, list[UsageGroup]] = {c: [] for c in clusters}
    for cluster, group in groups:
        out.setdefault(cluster or default, []).append(group)
    return out


def on_clusters(groups: Iterable[tuple[str, UsageGroup]]) -> list[tuple[str, UsageGroup]]:
    """UsageQueries.each's (job id, group) pairs as (cluster, group): a plain job id is on the
    default cluster, a qualified one names its own (core/slurm/job_ref.py)."""
    return [(job_ref.cluster_of(job_id or ""), group) for job_id, group in groups]
