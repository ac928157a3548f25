"""What the tick's start section reads (core/tick/starts.py), from a spec: the unstarted tasks with
their resources and profile groups, MaxArraySize, and the profile's ended attempts — one query,
only when right_size or `pack: auto` will read them, pooled as the viewer may pool them."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import replace

from campaignctl.adapters import identity, slurm
from campaignctl.adapters.store import Store
from campaignctl.core.packing.profile import group_of
from campaignctl.core.slurm.plan import DEFAULT_MAX_ARRAY_SIZE
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.core.tick.right_size import UsageSample
from campaignctl.core.tick.starts import StartFacts, Unstarted
from campaignctl.services.placement_facts import predictions


def start_facts(store: Store | None, spec: CampaignSpec, started: Collection[int] = (),
                max_array_size: int = DEFAULT_MAX_ARRAY_SIZE, place: bool = True) -> StartFacts:
    """The spec's first tasks not in `started`; `store` None: a new campaign's (a dry run's).
    With `clusters:` and `place`, each cluster's prediction for them (services/placement_facts.py)."""
    tasks = tuple(_unstarted(spec, [i for i in spec.first_tasks() if i not in started]))
    pooled = spec.profile is not None and bool(tasks) and (
        spec.policy.right_size.enabled or (spec.pack is not None and spec.pack.auto))
    facts = StartFacts(tasks, max_array_size, spec.max_parallel, spec.pack,
                       _samples(store, spec) if pooled else {}, spec.profile is not None)
    if not (spec.clusters and tasks and place):
        return facts
    return replace(facts, clusters=spec.clusters, ledger_cluster=slurm.cluster_name(),
                   predictions=predictions(spec, tasks[0].resources, tasks[0].index))


def _unstarted(spec: CampaignSpec, indices: list[int]) -> Iterator[Unstarted]:
    if spec.rungs or (spec.profile is not None and spec.profile.by):
        return (Unstarted(i, spec.resources_of(i), spec.group_of(i)) for i in indices)
    # one rung, no `profile.by`: every task asks the same and shares one group (a 1,000,000-task
    # submit looked both up per task, twice)
    resources, group = spec.resources, group_of(0, {}, ())
    return (Unstarted(i, resources, group) for i in indices)


def _samples(store: Store | None, spec: CampaignSpec) -> dict[str, tuple[UsageSample, ...]]:
    assert spec.profile is not None
    samples = (store or Store.open()).profiles.samples(spec.profile.name,
                                                                   viewer=identity.current_identity())
    by_group: dict[str, list[UsageSample]] = {}
    for s in samples:
        by_group.setdefault(s.group, []).append(s)
    return {group: tuple(members) for group, members in by_group.items()}
