"""`cancel` and `retry`: a person stops a campaign or some of its tasks, or runs again tasks
that were given up or cancelled, as logged decisions carried out like a tick's (core/decisions/by_hand.py
says which tasks qualify). Only the caller's campaigns, or those shared with them; every scancel
goes through the Actor, which touches only jobs of this campaign's own submissions.

A whole campaign cancelled is `cancelling` until its last attempt has ended (ticks keep
observing it, and act on nothing else), then `cancelled`. Submissions of it that had not reached
Slurm yet (waiting for room under a site limit, or for a refused try's backoff) are abandoned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from campaignctl.adapters import identity
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import ConflictError
from campaignctl.core.decisions.by_hand import CANCELLED, CANCELLING, Skipped, cancel_decisions, retry_decisions
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.governance.governance import gate
from campaignctl.core.model.records import CampaignRecord
from campaignctl.core.slurm.observe import task_views
from campaignctl.core.spec.task_selection import select_tasks
from campaignctl.core.tick.budget import assess
from campaignctl.core.tick.tick import gate_needs
from campaignctl.core.usage.cost import campaign_spend
from campaignctl.services.act import Actor, abandon_unsent
from campaignctl.services.campaigns import find_campaign, queue_of
from campaignctl.services.dispatch import new_token
from campaignctl.services.manual import manual_tick
from campaignctl.services.ownership import require_may_act
from campaignctl.services.tick_snapshot import fill, gather

DONE = ("finished", CANCELLED)


@dataclass(frozen=True, slots=True)
class ByHandResult:
    campaign: str
    action: str  # cancel | retry
    state: str  # the campaign's, after
    decisions: list[dict[str, object]] = field(default_factory=list)  # task, action, status, error
    skipped: list[dict[str, object]] = field(default_factory=list)  # task, why
    abandoned: list[str] = field(default_factory=list)  # submissions dropped before reaching Slurm

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def cancel(name: str, tasks: Sequence[int] | None = None, reason: str = "") -> ByHandResult:
    """Cancel the campaign (`tasks` None) or the tasks named."""
    store = Store.open()
    record = find_campaign(store, name)
    require_may_act(store, record, "cancel")
    who = identity.user_name()
    if tasks is None and (record.state in DONE or (record.state == CANCELLING and not _unstopped(store, record))):
        raise ConflictError(f"campaign {name!r} is {record.state}: nothing to cancel",
                            "its stops are sent; the next `reconcile` ends it cancelled once its jobs have ended"
                            if record.state == CANCELLING else f"`campaignctl status {name}` shows how its tasks ended")
    with manual_tick(store, record, f"cancel {name}") as (log, tick_id, leased):
        history = store.history(record.id)
        views = task_views(history, log.decided_tokens(record.id))
        states = {r.task_index: r.state for r in history}  # rows are by attempt: the latest wins
        chosen = select_tasks(states, tasks, None, name)
        decisions, skipped = cancel_decisions(views, chosen, who, reason, whole=tasks is None)
        # the whole campaign: submissions still waiting to go out go nowhere (their tasks are
        # given up above, by hand, so no tick reads them as refused by Slurm)
        abandoned = abandon_unsent(store, record) if tasks is None else []
        policy, _ = gather(store, log, record, views, history, {})
        outcomes = _act(Actor(store, log, record, policy, tick_id, queue_of(store, record), leased), decisions)
        if tasks is None:
            store.set_campaign_state(record.id, CANCELLING if any(d.action == "stop" for d in decisions)
                                     else CANCELLED)
        return ByHandResult(name, "cancel", store.campaign_state(record.id), outcomes, _skipped(skipped), abandoned)


def _unstopped(store: Store, record: CampaignRecord) -> bool:
    """Whether a cancelling campaign still has something this user's `cancel` would do: an ended
    attempt nobody answered, or a job of this user's no stop was applied to. A teammate's `cancel`
    leaves the owner's jobs running (Slurm lets only their owner cancel them): the owner's own
    `cancel` then stops them; a job of someone else's, or one already gone, is nothing to do here."""
    views = task_views(store.history(record.id), store.log.decided_tokens(record.id))
    decisions, _ = cancel_decisions(views, [v.index for v in views], "", "", whole=True)
    if any(d.action != "stop" for d in decisions):
        return True
    mine = {q.array_job_id for q in queue_of(store, record)()} if decisions else set()
    return any(str(d.inputs.get("job_id") or "").partition("_")[0] in mine for d in decisions)


def retry(name: str, tasks: Sequence[int] | None = None, states: Sequence[str] | None = None,
          reason: str = "", force: bool = False) -> ByHandResult:
    """New attempts, under the current revision, for the tasks named (by index and/or by the
    state their latest attempt ended in) that were given up or cancelled."""
    store = Store.open()
    record = find_campaign(store, name)
    require_may_act(store, record, "retry")
    who = identity.user_name()
    with manual_tick(store, record, f"retry {name}") as (log, tick_id, leased):
        history = store.history(record.id)
        views = task_views(history, log.decided_tokens(record.id))
        latest = {r.task_index: r.state for r in history}
        chosen = select_tasks(latest, tasks, states, name)
        if not chosen:
            raise ConflictError(f"no task of campaign {name!r} matches", _states_hint(latest))
        policy, snapshot = gather(store, log, record, views, history, {})
        actor = Actor(store, log, record, policy, tick_id, queue_of(store, record), leased)
        resources = {t: actor.spec.resources_of(t) for t in chosen}
        decisions, skipped = retry_decisions(views, chosen, resources, who, reason)
        if decisions and not force:
            snapshot = fill(store, record, snapshot, gate_needs(snapshot), queue_of(store, record))
            assessment = assess(snapshot.settings.budget, campaign_spend(snapshot.usage, policy.prices))
            if assessment.exhausted:
                raise ConflictError(f"campaign {name!r} has spent its budget: "
                                    + "; ".join(line.describe() for line in assessment.lines),
                                    "raise budget in the spec and `campaignctl submit` it (a new revision), "
                                    "or retry --force")
        outcomes = _act(actor, gate(decisions, policy))
        if decisions and record.state in (*DONE, CANCELLING):
            store.set_campaign_state(record.id, "active")  # ticks run its new attempts to their end
        return ByHandResult(name, "retry", store.campaign_state(record.id), outcomes, _skipped(skipped))


def _act(actor: Actor, decisions: list[Decision]) -> list[dict[str, object]]:
    if not decisions:
        return []
    array_of = {d.attempt_token: str(d.inputs.get("job_id") or "").partition("_")[0] or None for d in decisions}
    acted = actor.act(decisions, array_of, new_token, None)
    written = [i for i in acted.ids if i is not None]
    errors = {e.id: e.error for e in actor.log.entries(actor.record.id, ids=written)} if written else {}
    return [{"task": d.task_index, "action": d.action, "status": status, "error": errors.get(i or -1, ""),
             "job_id": job or ""}
            for d, i, (status, job) in zip(decisions, acted.ids, acted.in_order(("pending", None)), strict=True)]


def _skipped(skipped: Sequence[Skipped]) -> list[dict[str, object]]:
    return [{"task": s.task_index, "why": s.why} for s in skipped]


def _states_hint(latest: dict[int, str]) -> str:
    counts: dict[str, int] = {}
    for state in latest.values():
        counts[state] = counts.get(state, 0) + 1
    return "its tasks' latest states: " + ", ".join(f"{s} {n}" for s, n in sorted(counts.items()))

