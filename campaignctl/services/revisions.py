"""Revisions of a campaign: list them with who/why/known-good, diff them, mark one known-good
by hand, and the policy changes that create them (`policy set`, `policy promote`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from campaignctl.adapters import identity
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.policy_source import load_policy
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import ConflictError, NotFoundError, SpecError
from campaignctl.core.decisions.action_records import KnownGood
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.governance.revisions import change_summary, content_hash, revision_diff
from campaignctl.core.model.records import CampaignRecord, RevisionRecord
from campaignctl.core.policy.cause_rules import unknown_rule_params
from campaignctl.core.policy.policy import CAUSES, Policy, policy_from_dict, policy_to_dict
from campaignctl.core.tick.budget import CAMPAIGN_TASK, CAMPAIGN_TOKEN
from campaignctl.core.tick.tick import KNOWN_GOOD
from campaignctl.services.act import Actor
from campaignctl.services.campaigns import current_policy, find_campaign, queue_of
from campaignctl.services.dispatch import new_token
from campaignctl.services.manual import manual_tick
from campaignctl.services.ownership import require_may_act


@dataclass(frozen=True, slots=True)
class RevisionRow:
    number: int
    kind: str
    created_at: str
    author: str
    reason: str
    spec_hash: str
    content_hash: str
    policy: str
    shadow_policy: str  # label of a candidate policy in shadow, '' if none
    shadow_rules: list[str]  # rules of the enforced policy that run in shadow
    known_good: str  # '' or why (auto verdict or by whom)
    current: bool
    source_revision: int | None
    diff: str  # against the revision before it
    summary: list[str]  # what the diff changed, in a few lines (core/governance/revisions.change_summary)


@dataclass(frozen=True, slots=True)
class RevisionsResult:
    campaign: str
    current: int
    revisions: list[RevisionRow]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def known_good_revisions(log: DecisionLog, campaign_id: int) -> dict[int, str]:
    """Revision number → why it is known-good, from the decision log (marks are decisions)."""
    return {p.revision: e.reason for e in log.entries(campaign_id, actions=(KNOWN_GOOD,))
            if isinstance(p := e.typed, KnownGood)}


def list_revisions(name: str, diff: int | None = None) -> RevisionsResult:
    """Every revision of the campaign; `diff`, a revision the caller will show, must exist."""
    store = Store.open()
    record = find_campaign(store, name)
    if diff is not None:
        _revision(store, record, diff)
    good = known_good_revisions(store.log, record.id)
    revs = store.revisions(record.id)
    rows = []
    for before, rev in zip([None, *revs[:-1]], revs, strict=True):
        policy = policy_from_dict(json.loads(rev.policy_json))
        shadow = policy_from_dict(json.loads(rev.shadow_policy_json)) if rev.shadow_policy_json else None
        rows.append(RevisionRow(rev.number, rev.kind, rev.created_at, rev.author, rev.reason, rev.spec_hash,
                                content_hash(rev), policy.described, shadow.described if shadow else "",
                                policy.shadow_rules, good.get(rev.number, ""),
                                rev.number == record.current_revision, rev.source_revision,
                                revision_diff(before, rev), change_summary(before, rev)))
    return RevisionsResult(name, record.current_revision, rows)


def mark_good(name: str, number: int, reason: str = "") -> RevisionsResult:
    store = Store.open()
    record = find_campaign(store, name)
    require_may_act(store, record, "mark a revision known-good of")
    _revision(store, record, number)
    why = f"marked known-good by {identity.user_name()}" + (f": {reason}" if reason else "")
    _log_campaign_decision(store, record, f"mark-good {name}", Decision(
        CAMPAIGN_TASK, CAMPAIGN_TOKEN, "revision", KNOWN_GOOD, why, {"by": identity.user_name()},
        KnownGood(revision=number)))
    return list_revisions(name)


def set_policy(name: str, policy_file: str | Path, reason: str = "", shadow: bool = False) -> RevisionsResult:
    """A new revision whose enforced policy is `policy_file` — or, with `shadow`, whose enforced
    policy stays and `policy_file` runs next to it as a candidate that only proposes."""
    policy = load_policy(str(policy_file), str(Path.cwd()))  # a path, or a built-in name
    store = Store.open()
    record = find_campaign(store, name)
    require_may_act(store, record, "set the policy of")
    unknown = unknown_rule_params(policy, list(store.task_params(record.id).values()))
    if unknown:
        raise SpecError([problem for *_, problem in unknown], str(policy_file),
                        "name parameters the campaign's tasks have, or leave them out of the rule")
    current = store.revision(record.id, record.current_revision)
    text = json.dumps(policy_to_dict(policy if shadow else _told_as_before(policy, current)), sort_keys=True)
    if shadow:
        draft = replace(current, shadow_policy_json=text, kind="policy")
    else:
        draft = replace(current, policy_json=text, kind="policy")
    why = reason or (f"candidate policy {policy.described} in shadow" if shadow
                     else f"policy set to {policy.described}")
    _add(store, record, draft, why)
    return list_revisions(name)


def promote(name: str, reason: str = "", rule: str | None = None) -> RevisionsResult:
    """Make shadow decisions real: the candidate policy becomes the enforced one, or (without a
    candidate) the enforced policy's shadow rules — all, or only `rule` — start to act."""
    store = Store.open()
    record = find_campaign(store, name)
    require_may_act(store, record, "promote the policy of")
    current = store.revision(record.id, record.current_revision)
    if current.shadow_policy_json and rule is None:
        policy = _told_as_before(_enforcing(policy_from_dict(json.loads(current.shadow_policy_json)), None), current)
        why = reason or f"candidate policy {policy.label} promoted from shadow"
        draft = replace(current, policy_json=json.dumps(policy_to_dict(policy), sort_keys=True),
                        shadow_policy_json="", kind="promote")
    else:
        enforced = policy_from_dict(json.loads(current.policy_json))
        shadowed = enforced.shadow_rules
        if not shadowed or (rule is not None and rule not in shadowed):
            what = f"rule {rule!r} is not in shadow" if rule else "nothing runs in shadow"
            raise ConflictError(f"campaign {name!r}: {what}",
                                f"shadow rules now: {', '.join(shadowed) or 'none'}; "
                                f"`campaignctl policy set {name} FILE --shadow` adds a candidate policy")
        policy = _enforcing(enforced, rule)
        why = reason or f"{rule or ', '.join(shadowed)} promoted from shadow"
        draft = replace(current, policy_json=json.dumps(policy_to_dict(policy), sort_keys=True), kind="promote")
    _add(store, record, draft, why)
    return list_revisions(name)


def _told_as_before(policy: Policy, current: RevisionRecord) -> Policy:
    """A policy that becomes the enforced one keeps the campaign's `notify:` (from its spec or its
    old policy) unless it names channels of its own: changing rules does not silence anyone."""
    if policy.notify.enabled:
        return policy
    return replace(policy, notify=policy_from_dict(json.loads(current.policy_json)).notify)


def _enforcing(policy: Policy, rule: str | None) -> Policy:
    """`policy` with its shadow switched off: everywhere, or for one rule (the others stay in shadow)."""
    shadow = set(policy.shadow_rules) - {rule} if rule else set()

    def mode(name: str) -> str:
        return "shadow" if name in shadow else "enforce"

    rules = {k: replace(policy.rule(k), mode=mode(k)) for k in {*policy.rules, *(shadow & set(CAUSES))}}
    u = policy.utilisation
    return replace(policy, mode="enforce", rules=rules, fallback=replace(policy.fallback, mode=mode("gpu_fallback")),
                   utilisation=replace(u, data_starved=replace(u.data_starved, mode=mode("data_starved")),
                                       gpu_idle=replace(u.gpu_idle, mode=mode("gpu_idle"))))


def _add(store: Store, record: CampaignRecord, draft: RevisionRecord, reason: str) -> int:
    if content_hash(draft) == content_hash(store.revision(record.id, record.current_revision)):
        raise ConflictError(f"campaign {record.name!r}: revision {record.current_revision} already has this content",
                            "nothing to change; `campaignctl revisions NAME` shows the revisions")
    # spec_hash stays the submitted spec's: `submit` of that same file again changes nothing
    return store.insert_revision(replace(draft, author=identity.user_name(), reason=reason, source_revision=None))


def _revision(store: Store, record: CampaignRecord, number: int) -> RevisionRecord:
    known = [r.number for r in store.revisions(record.id)]
    if number not in known:
        raise NotFoundError(f"campaign {record.name!r} has no revision {number}",
                            f"revisions: {', '.join(map(str, known))}")
    return store.revision(record.id, number)


def _log_campaign_decision(store: Store, record: CampaignRecord, scope: str, decision: Decision) -> None:
    """A record-only decision written by hand (no Slurm call), in its own log tick."""
    with manual_tick(store, record, scope) as (log, tick_id, leased):
        policy, _ = current_policy(store, record)
        Actor(store, log, record, policy, tick_id, queue_of(store, record), leased).act(
            [decision], {}, new_token, None)
