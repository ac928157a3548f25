"""Reads every service shares about a campaign: finding it by the name a user typed, its current
revision's policy and typed settings, and how far its ladder has promoted."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

from campaignctl.adapters import slurm
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import NotFoundError
from campaignctl.core.model.records import CampaignRecord
from campaignctl.core.policy.policy import Policy, policy_from_dict
from campaignctl.core.spec.settings import CampaignSettings, campaign_settings
from campaignctl.core.tuning.ladder import NOT_PROMOTED, promoted_by_rung, unstarted_label
from campaignctl.core.tuning.search import NOT_ASKED


def find_campaign(store: Store, name: str) -> CampaignRecord:
    """The campaign named `name`, or NotFoundError (exit 4) listing the known ones."""
    record = store.campaign(name)
    if record is None:
        known = ", ".join(c.name for c in store.campaigns()) or "none yet"
        raise NotFoundError(f"no campaign named {name!r}", f"known campaigns: {known}")
    return record


def find_campaigns(store: Store, name: str | None) -> list[CampaignRecord]:
    """Every campaign when no name is given, else the one named (NotFoundError if none is)."""
    return store.campaigns() if name is None else [find_campaign(store, name)]


def current_policy(store: Store, record: CampaignRecord) -> tuple[Policy, CampaignSettings]:
    """The policy and settings stored with the current revision (no YAML read on a tick)."""
    revision = store.revision(record.id, record.current_revision)
    return policy_from_dict(json.loads(revision.policy_json)), campaign_settings(json.loads(revision.settings_json))


def promotions(log: DecisionLog, campaign_id: int) -> dict[int, int]:
    """Rung → how many configs it promoted, for every rung whose promotion has been decided."""
    entries = log.entries(campaign_id, actions=("promote", "retire"))
    return promoted_by_rung((e.mode, e.typed) for e in entries)


def unstarted_labels(log: DecisionLog, campaign_id: int, settings: CampaignSettings) -> Callable[[int], str | None]:
    """What to call a task that never started: NOT_PROMOTED when its config was not kept,
    NOT_ASKED for a search's trial the sampler was not asked for yet."""
    if settings.search:  # trial t is task t; its later rungs' tasks wait for a promotion
        trials = settings.search.trials
        return lambda task: NOT_ASKED if task < trials else NOT_PROMOTED
    if not settings.progressive:
        return lambda _task: None
    decided = set(promotions(log, campaign_id))
    return lambda task: unstarted_label(task, settings, decided)


def queue_of(store: Store, record: CampaignRecord) -> Callable[[], list[slurm.QueuedJob]]:
    """This user's queued jobs where the campaign's may be, listed once when first asked: one
    `squeue -M` over its `clusters:` and the cluster SLURM_CONF names, or `squeue --me` without."""
    named = [c.name for c in current_policy(store, record)[1].clusters]
    if not named:
        return slurm.own_queued_jobs
    return functools.cache(lambda: slurm.queued_on(sorted({*named, slurm.cluster_name()}))[0])
