"""`rollback`: make an earlier revision's content current again (as a new revision) and give
work that has not started the resources it would have under it, every step a logged decision."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime

from campaignctl.adapters import identity
from campaignctl.adapters.decision_log import DecisionLog, LoggedDecision
from campaignctl.adapters.store import Store
from campaignctl.core.base.clock import UTC
from campaignctl.core.base.errors import ConflictError, NotFoundError
from campaignctl.core.decisions.action_records import MakeCurrent, Release, ResizeNext, ResizePending, Resubmit
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.decisions.log_facts import still_held
from campaignctl.core.governance.ownership import share_of
from campaignctl.core.governance.revisions import content_hash
from campaignctl.core.governance.rollback import RULE, LoggedChange, plan_rollback
from campaignctl.core.model.records import CampaignRecord, HistoryRow, RevisionRecord
from campaignctl.core.policy.policy import policy_from_dict
from campaignctl.core.slurm.observe import task_views
from campaignctl.core.tick.budget import CAMPAIGN_TASK, CAMPAIGN_TOKEN, pending_elements
from campaignctl.services.act import Actor
from campaignctl.services.campaigns import find_campaign, queue_of
from campaignctl.services.dispatch import new_token
from campaignctl.services.manual import manual_tick
from campaignctl.services.ownership import require_may_act, require_owner_for_share_change
from campaignctl.services.revisions import known_good_revisions

FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Step:
    task: int
    action: str
    reason: str
    status: str  # planned | applied | failed
    job_id: str | None = None


@dataclass(frozen=True, slots=True)
class RollbackResult:
    campaign: str
    from_revision: int
    target: int
    new_revision: int | None  # None on --dry-run
    dry_run: bool
    steps: list[Step] = field(default_factory=list)
    left_alone: list[str] = field(default_factory=list)
    withdrawn: list[int] = field(default_factory=list)  # decisions awaiting approval that no longer apply

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def rollback(name: str, to: int | None = None, dry_run: bool = False, reason: str = "") -> RollbackResult:
    store = Store.open()
    record = find_campaign(store, name)
    if not dry_run:
        require_may_act(store, record, "roll back", "`rollback --dry-run` shows what it would do")
    log = store.log
    target = _target(store, log, record, to)
    steps, left_alone, withdrawn, views = _plan(store, log, record, target)
    if dry_run:
        return RollbackResult(name, record.current_revision, target.number, None, True,
                              [Step(d.task_index, d.action, d.reason, "planned") for d in steps],
                              left_alone, [e.id for e in withdrawn])
    require_owner_for_share_change(store, record, share_of(json.loads(target.settings_json)))
    with manual_tick(store, record, f"rollback {name}") as (log, tick_id, leased):
        why = reason or f"rollback to revision {target.number}"
        number = store.insert_revision(replace(target, author=identity.user_name(), reason=why, kind="rollback",
                                               source_revision=target.number))
        current = find_campaign(store, name)
        made_current = Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, RULE, "make_current",
                                f"revision {number} made current with the content of revision {target.number} "
                                f"(by {identity.user_name()}: {why}); {len(steps)} compensating step(s).",
                                {"from_revision": record.current_revision, "by": identity.user_name()},
                                MakeCurrent(revision=number, target_revision=target.number))
        policy = policy_from_dict(json.loads(target.policy_json))
        actor = Actor(store, log, current, policy, tick_id, queue_of(store, current), leased)
        array_of = {a.token: a.array_job_id for v in views for a in v.attempts}
        actor.act([made_current], {}, lambda: "", None)  # first in the log: what the steps below serve
        outcomes = actor.act(steps, array_of, new_token, None)
        if withdrawn:
            log.write_outcomes([e.id for e in withdrawn], "withdrawn", {"rollback_to": target.number},
                               f"rolled back to revision {target.number} before anyone approved it")
    return RollbackResult(name, record.current_revision, target.number, number, False,
                          [Step(d.task_index, d.action, d.reason, *o)
                           for d, o in zip(steps, outcomes.in_order(("applied", None)), strict=True)],
                          left_alone, [e.id for e in withdrawn])


def _target(store: Store, log: DecisionLog, record: CampaignRecord, to: int | None) -> RevisionRecord:
    revisions = store.revisions(record.id)
    current = next(r for r in revisions if r.number == record.current_revision)
    if to is not None:
        found = next((r for r in revisions if r.number == to), None)
        if found is None:
            raise NotFoundError(f"campaign {record.name!r} has no revision {to}",
                                f"revisions: {', '.join(str(r.number) for r in revisions)}")
        if to == current.number:
            raise ConflictError(f"revision {to} is already current", "`campaignctl revisions NAME` lists them")
        return found
    good = known_good_revisions(log, record.id)
    here = content_hash(current)
    candidates = [r for r in revisions if r.number in good and content_hash(r) != here]
    if not candidates:
        raise ConflictError(f"campaign {record.name!r} has no known-good revision to roll back to",
                            f"name one: `campaignctl rollback {record.name} --to REV`; "
                            f"`campaignctl revisions {record.name} --mark-good REV` marks one")
    return candidates[-1]


def _plan(store: Store, log: DecisionLog, record: CampaignRecord,
          target: RevisionRecord) -> tuple[list[Decision], list[str], list[LoggedDecision], list[TaskView]]:
    rows = store.history(record.id, done_tasks=False)
    views = task_views(rows, log.decided_tokens(record.id))
    entries = log.entries(record.id, actions=("resize_pending", "resubmit", "resize_next", "hold", "release"))
    plan = plan_rollback(target.number, policy_from_dict(json.loads(target.policy_json)), views,
                         _changes(entries, rows), FAR_FUTURE)
    steps = list(plan.steps)
    release = _release_holds(entries, views, target.number)
    if release is not None:
        steps.append(release)
    withdrawn = [e for e in log.awaiting(record.id) if e.revision > target.number]
    return steps, plan.left_alone, withdrawn, views


def _changes(entries: list[LoggedDecision], rows: list[HistoryRow]) -> list[LoggedChange]:
    """Applied, enforced resource changes, each on the attempt it set (a resubmit: its retry)."""
    retry_token = {(r.submission_token, r.task_index): r.token for r in rows}
    out = []
    for e in entries:
        if e.status != "applied" or e.mode != "enforce" or e.action in ("hold", "release"):
            continue
        p = e.typed
        if not isinstance(p, (Resubmit, ResizePending, ResizeNext)):
            continue
        token = retry_token.get((e.group_token, e.task_index), "") if e.action == "resubmit" else e.attempt_token
        if token or e.action == "resize_next":
            out.append(LoggedChange(e.id, e.revision, token, e.action, p.changes, e.task_index,
                                    isinstance(p, Resubmit) and p.replacement))
    return out


def _release_holds(entries: list[LoggedDecision], views: list[TaskView], target: int) -> Decision | None:
    """Pending elements that a budget hold made after revision `target` still holds."""
    held = still_held(entries, after_revision=target)
    pending = pending_elements(views)
    arrays = {a: sorted(held[a] & set(i)) for a, i in pending.items() if held.get(a, set()) & set(i)}
    if not arrays:
        return None
    count = sum(map(len, arrays.values()))
    return Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, RULE, "release",
                    f"rollback to revision {target}: {count} element(s) held after it are released.",
                    {"target_revision": target}, Release(arrays={a: tuple(i) for a, i in arrays.items()}))
