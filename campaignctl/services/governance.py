"""Governance in a tick: shadow rules and a candidate policy propose without acting, decisions
above the approval limits wait for a human (and expire), and the current revision is marked
known-good once its work ran long enough without failures its policy caused."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from campaignctl.adapters.governance_facts import revision_run
from campaignctl.core.budget import CAMPAIGN_TASK, CAMPAIGN_TOKEN
from campaignctl.core.clock import read_time
from campaignctl.core.decide import Decision, TaskView, decide
from campaignctl.core.governance import Awaiting, apply_modes, as_candidate, expired, gate, known_good_verdict
from campaignctl.core.policy import Policy, policy_from_dict
from campaignctl.core.telemetry import Summary
from campaignctl.core.utilisation import decide_utilisation
from campaignctl.services.revisions import KNOWN_GOOD, known_good_revisions
from campaignctl.services.rules import CampaignContext, early_stops


def governed(ctx: CampaignContext, decisions: Sequence[Decision]) -> list[Decision]:
    """Shadow rules' decisions become proposals (once per attempt); the rest pass the approval gate."""
    return gate(apply_modes(decisions, ctx.policy, ctx.log.proposal_keys(ctx.record.id)), ctx.policy)


def candidate(ctx: CampaignContext) -> Policy | None:
    revision = ctx.store.revision(ctx.record.id, ctx.record.current_revision)
    return policy_from_dict(json.loads(revision.shadow_policy_json)) if revision.shadow_policy_json else None


def candidate_proposals(ctx: CampaignContext, policy: Policy, views: Sequence[TaskView],
                        summaries: Mapping[str, Summary], fired: set[tuple[str, str]]) -> list[Decision]:
    """What the candidate policy would decide over the same views: per-cause rules, pending
    resizes, utilisation rules and early stopping (fallback and budget are the enforced policy's alone)."""
    decisions = decide(views, policy, ctx.now, tuple(ctx.settings.get("gpu_types") or ()))
    decisions += decide_utilisation(views, summaries, policy, int(ctx.settings.get("min_gpus") or 0), fired)
    decisions += early_stops(ctx, views, fired, policy)
    return as_candidate(decisions, policy, ctx.log.proposal_keys(ctx.record.id))


def known_good_mark(ctx: CampaignContext) -> list[Decision]:
    number = ctx.record.current_revision
    if number in known_good_revisions(ctx.log, ctx.record.id):
        return []
    run = revision_run(ctx.store.engine, ctx.store.revision(ctx.record.id, number))
    verdict = known_good_verdict(run, datetime.now(timezone.utc), ctx.policy.known_good_after_s)
    if not verdict:
        return []
    return [Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, "revision", KNOWN_GOOD, verdict,
                     {"attempts_ran": run.attempts_ran, "current_since": run.current_since.isoformat(),
                      "known_good_after_s": ctx.policy.known_good_after_s}, {"revision": number})]


def expire_awaiting(ctx: CampaignContext) -> list[int]:
    """Close, as `expired`, decisions that waited longer than the policy's approval.expire_after."""
    waiting = ctx.log.awaiting(ctx.record.id)
    late = expired((Awaiting(e.id, read_time(e.created_at)) for e in waiting),
                   datetime.now(timezone.utc), ctx.policy.approval.expire_after_s)
    if late:
        ctx.log.write_outcomes(late, "expired", {"expire_after_s": ctx.policy.approval.expire_after_s},
                               "nobody approved or rejected it in time; not carried out")
    return late
