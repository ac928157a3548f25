"""What each attempt of a campaign used, as the store has it (the last tick's sacct facts and
telemetry summaries; no Slurm call): the input of every efficiency figure (core/usage/efficiency.py)."""

from __future__ import annotations

from collections.abc import Sequence
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


def attempt_usage(store: Store, campaign_id: int) -> list[AttemptUsage]:
    """Every attempt of the campaign, by task then attempt number."""
    attempts = ReportQueries(store.engine).attempts(campaign_id)
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


def task_efficiencies(usage: Sequence[AttemptUsage], prices: Prices) -> dict[int, Efficiency]:
    return {task: task_efficiency(uses, prices) for task, uses in by_task(usage).items()}


Pairs = list[tuple[str, UsageGroup]]  # usage groups with their job ids (Store.attempt_usage_groups)


def by_cluster(groups: Pairs, clusters: Sequence[str]) -> dict[str, Pairs]:
    """A campaign's usage groups (with their job ids) by the cluster each ran on, every cluster of
    `clusters` listed: a plain job id is on the cluster SLURM_CONF names (core/slurm/job_ref.py)."""
    default = slurm.cluster_name()
    out: dict[str, Pairs] = {c: [] for c in clusters}
    for job_id, group in groups:
        out.setdefault(job_ref.cluster_of(job_id or "") or default, []).append((job_id, group))
    return out
