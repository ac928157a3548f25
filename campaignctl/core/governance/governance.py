"""Governance over a tick's decisions: which run in shadow (proposed, never carried out), which
must wait for a human (`campaignctl approve`), which waited too long, and when a revision has
earned the name known-good. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from campaignctl.core.decisions.action_records import with_resources
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.policy.policy import Policy

# Decisions that change something in Slurm and can therefore wait for approval. Give-ups, alerts,
# notes for a next attempt, budget holds and throttles never wait: they spend nothing.
GATEABLE = ("resubmit", "retry", "resize_pending", "cancel", "stop")
ProposalKey = tuple[str, str, str, str]  # (policy digest, attempt token, rule, action)


def proposal_key(digest: str, d: Decision) -> ProposalKey:
    return digest, d.attempt_token, d.rule, d.action


def apply_modes(decisions: Sequence[Decision], policy: Policy,
                proposed: Collection[ProposalKey]) -> list[Decision]:
    """Mark the decisions of shadow rules; a shadow proposal is logged once per attempt, not
    on every tick that would make it again (a shadow decision answers nothing, so it recurs)."""
    out = []
    for d in decisions:
        if policy.mode_of(d.rule) == "shadow":
            if proposal_key(policy.digest, d) in proposed:
                continue
            d = replace(d, mode="shadow")
        out.append(d)
    return out


def as_candidate(decisions: Sequence[Decision], candidate: Policy,
                 proposed: Collection[ProposalKey]) -> list[Decision]:
    """A whole candidate policy run next to the enforced one (`policy set --shadow`)."""
    return [replace(d, mode="shadow") for d in decisions if proposal_key(candidate.digest, d) not in proposed]


def gate(decisions: Sequence[Decision], policy: Policy) -> list[Decision]:
    """Hold back, for a human, every enforced Slurm-changing decision above the policy's approval
    limits: more memory/GPUs/CPUs than allowed, a rule acting on too many tasks at once, or a
    rule that always needs approval. Its full resources go into params so it can be carried
    out exactly as decided once approved."""
    limits = policy.approval
    if not limits.enabled:
        return list(decisions)
    per_rule = Counter((d.rule, d.action) for d in decisions if _gateable(d))
    out = []
    for d in decisions:
        why = _why_gated(d, policy, per_rule[(d.rule, d.action)]) if _gateable(d) else ""
        if why:
            d = replace(d, gate=why, typed=with_resources(d.typed, d.resources))
        out.append(d)
    return out


def _gateable(d: Decision) -> bool:
    return d.mode == "enforce" and d.action in GATEABLE


def _why_gated(d: Decision, policy: Policy, same_rule: int) -> str:
    limits = policy.approval
    reasons = []
    if d.rule in limits.always:
        reasons.append(f"the {d.rule} rule always needs approval")
    r = d.resources
    if r is not None:
        for value, limit, what in ((r.mem_mb, limits.max_mem_mb, "MB of memory"), (r.gpus, limits.max_gpus, "GPUs"),
                                   (r.cpus_per_task, limits.max_cpus, "CPUs")):
            if limit and value > limit:
                reasons.append(f"{value} {what} is above approval limit {limit}")
    if limits.max_tasks and same_rule > limits.max_tasks:
        reasons.append(f"{d.rule} → {d.action} on {same_rule} tasks at once is above approval limit {limits.max_tasks}")
    return "; ".join(reasons)


@dataclass(frozen=True, slots=True)
class Awaiting:
    decision_id: int
    created_at: datetime  # UTC


def expired(awaiting: Iterable[Awaiting], now_utc: datetime, expire_after_s: int) -> list[int]:
    """Decisions nobody approved or rejected in time: they are closed as `expired`, never carried out."""
    limit = timedelta(seconds=expire_after_s)
    return [a.decision_id for a in awaiting if now_utc - a.created_at >= limit]


@dataclass(frozen=True, slots=True)
class RevisionRun:
    """What happened while one revision was current, for the known-good verdict."""

    number: int
    current_since: datetime  # UTC
    attempts_ran: int  # attempts observed running or finished since it became current
    policy_failures: tuple[str, ...]  # one line per failure its own decisions caused


def known_good_verdict(run: RevisionRun, now_utc: datetime, known_good_after_s: int) -> str:
    """'' (not yet), or the reason the revision is known-good: its work ran for the policy's
    `known_good_after` without a failure that its own decisions caused (a retry or resize it made
    that failed again, or an action Slurm refused)."""
    if run.policy_failures or run.attempts_ran == 0:
        return ""
    ran_for = now_utc - run.current_since
    if ran_for < timedelta(seconds=known_good_after_s):
        return ""
    return (f"revision {run.number} ran {_hours(ran_for)} with {run.attempts_ran} attempt(s) "
            f"started and no failure caused by its policy's decisions.")


def _hours(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
