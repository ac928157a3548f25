"""`approve` / `reject` a decision that waits for a human. The verdict is itself a decision in
the log (who, why); an approved decision is then carried out exactly as it was decided, and
a crash in between is finished by the next tick's repair (the verdict names the submission
token a resubmit will use, so it is never submitted twice)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from campaignctl.adapters import identity
from campaignctl.adapters.decision_log import DecisionLog, LoggedDecision
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import ConflictError, NotFoundError
from campaignctl.core.decisions.action_records import Verdict, array_of, resources_of
from campaignctl.core.decisions.decision import Decision
from campaignctl.services.act import Actor
from campaignctl.services.campaigns import current_policy, find_campaign, queue_of
from campaignctl.services.dispatch import new_token
from campaignctl.services.manual import manual_tick
from campaignctl.services.ownership import require_may_act


@dataclass(frozen=True, slots=True)
class VerdictResult:
    decision_id: int
    campaign: str
    verdict: str  # approve | reject
    status: str  # the decision's outcome now: applied | failed | rejected | retrying (Slurm refused it)
    job_id: str | None
    error: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def approve(decision_id: int, reason: str = "") -> VerdictResult:
    return _verdict(decision_id, "approve", reason)


def reject(decision_id: int, reason: str = "") -> VerdictResult:
    return _verdict(decision_id, "reject", reason)


def pending_approvals(campaign: str | None = None) -> list[LoggedDecision]:
    store = Store.open()
    record_id = None
    if campaign is not None:
        record_id = find_campaign(store, campaign).id
    return store.log.awaiting(record_id)


def _verdict(decision_id: int, verdict: str, reason: str) -> VerdictResult:
    store = Store.open()
    log = store.log
    entry = log.entry(decision_id)
    if entry is None:
        waiting = ", ".join(f"#{e.id}" for e in log.awaiting(None)) or "none"
        raise NotFoundError(f"no decision #{decision_id}", f"awaiting approval: {waiting} (`campaignctl approvals`)")
    record = store.campaign(entry.campaign)
    assert record is not None
    require_may_act(store, record, f"{verdict} decisions of")
    _still_awaiting(log, record.id, entry)
    who = identity.user_name()
    token = new_token()
    with manual_tick(store, record, f"{verdict} #{decision_id}") as (log, tick_id, leased):
        _still_awaiting(log, record.id, entry)  # two people's verdicts at once: the second finds it answered
        policy, _ = current_policy(store, record)
        actor = Actor(store, log, record, policy, tick_id, queue_of(store, record), leased)
        what = f"{entry.rule} → {entry.action} for task {entry.task_index}"
        why = f"decision #{decision_id} ({what}) {verdict}d by {who}" + (f": {reason}" if reason else ".")
        record_decision = Decision(entry.task_index, entry.attempt_token, "approval", verdict, why,
                                   {"by": who, "gate": entry.gate},
                                   Verdict(decision_id=decision_id, token=token))
        actor.act([record_decision], {}, new_token, None)
        if verdict == "reject":
            log.write_outcomes([decision_id], "rejected", {"by": who, "reason": reason})
            return VerdictResult(decision_id, entry.campaign, verdict, "rejected", None, "")
        status, job_id = carry_out(actor, entry, token)
    done = log.entry(decision_id)
    return VerdictResult(decision_id, entry.campaign, verdict, status, job_id, done.error if done else "")


def _still_awaiting(log: DecisionLog, campaign_id: int, entry: LoggedDecision) -> None:
    """Gated, unanswered and not yet approved; otherwise ConflictError (5)."""
    if entry.id not in {e.id for e in log.awaiting(campaign_id)}:
        current = log.entry(entry.id) or entry
        raise ConflictError(f"decision #{entry.id} is {current.status}, not awaiting approval",
                            "`campaignctl approvals` lists what waits for approval")


def carry_out(actor: Actor, entry: LoggedDecision, token: str) -> tuple[str, str | None]:
    """Carry out a logged, approved decision as it was decided (resources from its params)."""
    p = entry.typed
    decision = Decision(entry.task_index, entry.attempt_token, entry.rule, entry.action, entry.reason,
                        entry.inputs, p, resources_of(p))
    array = array_of(p) or str(entry.inputs.get("job_id") or "").partition("_")[0]
    return actor.carry_out_approved(decision, entry.id, lambda: token, {entry.attempt_token: array or None})
