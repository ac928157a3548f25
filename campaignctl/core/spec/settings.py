"""A revision's campaign settings, typed: what a tick needs without re-reading the spec. Stored
as JSON with the revision (CampaignSpec.settings writes it); parsed once, here. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from campaignctl.core.packing.profile import Profile
from campaignctl.core.resources import Resources, resources_from
from campaignctl.core.spec.clusters_spec import ClusterSpec, clusters_from_settings
from campaignctl.core.spec.objective import ObjectiveSpec, objective_from_settings
from campaignctl.core.spec.pack_spec import PackSpec
from campaignctl.core.spec.rungs import Rung, rung_from_settings
from campaignctl.core.spec.search_spec import SearchSpec, search_from_settings
from campaignctl.core.spec.spec import Budget


@dataclass(frozen=True, slots=True)
class CampaignSettings:
    tasks: int = 0  # how many tasks the campaign has, every rung's
    max_parallel: int | None = None
    gpu_types: tuple[str, ...] = ()  # acceptable GPU types, in the spec's order of preference
    min_gpus: int = 0
    budget: Budget = field(default_factory=Budget)
    configs: int = 0  # configs per rung (0 without rungs)
    rungs: tuple[Rung, ...] = ()  # () for a plain campaign
    profile: Profile | None = None  # `profile:`: the kind of work right_size pools history under
    objective: ObjectiveSpec | None = None  # `objective:`: the metric the campaign optimises
    search: SearchSpec | None = None  # `search:`: its tasks are trials a sampler asks for
    search_resources: Resources | None = None  # what a trial's first attempt asks for (the budget gate)
    pack: PackSpec | None = None  # `pack:`: how its first attempts share jobs and GPUs
    clusters: tuple[ClusterSpec, ...] = ()  # `clusters:`: where its work may go (core/spec/clusters_spec.py)
    # the nodes the spec itself leaves out (`resources.exclude`, every rung's): what a retry or a
    # pending element keeps excluding once the ledger and the campaign no longer exclude a node.
    # None: a revision written before this was stored, whose retries keep every node they exclude
    exclude: frozenset[str] | None = None

    @property
    def progressive(self) -> bool:
        return bool(self.rungs)

    @property
    def first_tasks(self) -> int:
        """How many tasks the campaign starts with, indices 0 … n-1: every task, the first rung's
        configs (the rest are promoted), none of a search's (its ticks ask for trials)."""
        return 0 if self.search else self.configs if self.rungs else self.tasks


def campaign_settings(data: Mapping[str, Any]) -> CampaignSettings:
    """The settings of a revision's `settings_json` (older revisions lack keys: their defaults;
    `share`, which says who may act rather than how, is read by core/governance/ownership.py share_of)."""
    rungs = tuple(rung_from_settings(i, r) for i, r in enumerate(data.get("rungs") or []))
    return CampaignSettings(
        tasks=int(data.get("tasks") or 0), max_parallel=data.get("max_parallel") or None,
        gpu_types=tuple(data.get("gpu_types") or ()), min_gpus=int(data.get("min_gpus") or 0),
        budget=Budget(**data.get("budget") or {}), configs=int(data.get("configs") or 0) if rungs else 0,
        rungs=rungs, profile=_profile(data.get("profile")), objective=objective_from_settings(data.get("objective")),
        search=search_from_settings(data.get("search")),
        search_resources=resources_from(data["search"].get("resources")) if isinstance(data.get("search"), dict)
        else None, pack=_pack(data.get("pack")), clusters=clusters_from_settings(data.get("clusters")),
        exclude=frozenset(str(n) for n in data["exclude"]) if isinstance(data.get("exclude"), list) else None)


def _pack(value: Any) -> PackSpec | None:
    if not isinstance(value, dict):
        return None
    ints = {k: v for k in ("per_gpu", "per_job", "cpus", "processes") if isinstance(v := value.get(k), int)}
    return PackSpec(**ints, auto=bool(value.get("auto", False)))


def _profile(value: Any) -> Profile | None:
    if not isinstance(value, dict):
        return None
    return Profile(str(value["name"]), tuple(value.get("by") or ()), bool(value.get("shared", False)))
