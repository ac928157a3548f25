"""`resume`: release what a budget hold held and make a paused campaign active again, as a
logged `release` decision carried out like a tick's (under the same lock, so no tick races it).

A progressive campaign paused at the promotion gate (the next rung costs more than the budget
has left) is resumed only when the budget now pays for that promotion, or with --force: the
release then records `promotion.forced`, and the next tick promotes instead of holding again."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import ConflictError
from campaignctl.core.decisions.action_records import Release
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.decisions.log_facts import still_held
from campaignctl.core.slurm.observe import task_views
from campaignctl.core.tick.budget import CAMPAIGN_TASK, CAMPAIGN_TOKEN, Assessment, assess, pending_elements
from campaignctl.core.tick.tick import Gate, gate_needs, promotion_gate
from campaignctl.core.usage.cost import campaign_spend
from campaignctl.services.act import Actor
from campaignctl.services.campaigns import find_campaign, queue_of
from campaignctl.services.dispatch import new_token
from campaignctl.services.manual import manual_tick
from campaignctl.services.ownership import require_may_act
from campaignctl.services.tick_snapshot import fill, gather


@dataclass(frozen=True, slots=True)
class ResumeResult:
    campaign: str
    state: str
    released: dict[str, list[int]]
    status: str  # applied | failed
    error: str
    budget: dict[str, object]
    promotion: str = ""  # the promotion the budget gate held, now let through ('' if none was due)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def resume(name: str, force: bool = False, reason: str = "") -> ResumeResult:
    store = Store.open()
    record = find_campaign(store, name)
    require_may_act(store, record, "resume")
    if record.state != "paused":
        raise ConflictError(f"campaign {name!r} is {record.state}, not paused; nothing to resume",
                            f"reconcile pauses a campaign when its budget is reached; see `campaignctl status {name}`")
    with manual_tick(store, record, f"resume {name}") as (log, tick_id, leased):
        history = store.history(record.id, done_tasks=False)
        views = task_views(history, log.decided_tokens(record.id))
        policy, snapshot = gather(store, log, record, views, history, {})
        snapshot = fill(store, record, snapshot, gate_needs(snapshot), queue_of(store, record))
        budget = snapshot.settings.budget
        assessment = assess(budget, campaign_spend(snapshot.usage, policy.prices))
        if assessment.exhausted and not force:
            raise ConflictError(f"campaign {name!r} is still over its budget: {_binding(assessment)}",
                                "raise budget in the spec and run `campaignctl submit SPEC` (a new revision), "
                                "then resume; or resume --force to release anyway")
        gate = promotion_gate(snapshot, policy)
        if gate is not None and gate.shortfall and not force:
            raise ConflictError(f"campaign {name!r} cannot pay for its next rung: {gate.shortfall}",
                                "raise budget in the spec and run `campaignctl submit SPEC` (a new revision), "
                                "then resume; or resume --force to promote anyway")
        held = still_held(log.entries(record.id, actions=("hold", "release")))
        pending = pending_elements(views)
        arrays = {a: sorted(set(i) & held[a]) for a, i in pending.items() if set(i) & held.get(a, set())}
        forced = assessment.exhausted or bool(gate and gate.shortfall)
        why = reason or ("forced" if forced else "the budget admits more work")
        promotion = _promotion_note(gate)
        decision = Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, "budget", "release",
                            f"resumed by hand ({why}): {sum(map(len, arrays.values()))} held element(s) released"
                            + (f"; {promotion}." if promotion else "."),
                            {"budget": assessment.to_dict(), "force": force, "revision": record.current_revision,
                             **_gate_inputs(gate)},
                            Release(arrays={a: tuple(i) for a, i in arrays.items()},
                                    limits=budget.limits() if assessment.exhausted else {}))
        actor = Actor(store, log, record, policy, tick_id, queue_of(store, record), leased)
        (outcome,) = actor.act([decision], {}, new_token, None).in_order(("pending", None))
        entry = log.entries(record.id, actions=("release",))[-1]
        return ResumeResult(name, store.campaign_state(record.id), arrays, outcome[0], entry.error,
                            assessment.to_dict(), promotion)


def _gate_inputs(gate: Gate | None) -> dict[str, object]:
    """What the next tick's promotion gate reads back (services/tick_snapshot.py forced_rungs)."""
    if gate is None:
        return {}
    return {"promotion": {"rung": gate.rung, "to_rung": gate.to_rung, "forced": bool(gate.shortfall),
                          "shortfall": gate.shortfall}}


def _promotion_note(gate: Gate | None) -> str:
    if gate is None:
        return ""
    past = f", past the budget ({gate.shortfall})" if gate.shortfall else ""
    return f"the promotion into rung {gate.to_rung} may proceed{past}"


def _binding(a: Assessment) -> str:
    return "; ".join(line.describe() for line in a.lines)
