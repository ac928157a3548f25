"""A progressive campaign's tick: once every task of the current rung has settled, rank the
configs by the rung's metric and promote the survivors into the next rung (a new array), if the
budget can pay for it. Campaigns without rungs skip all of this."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.core.budget import Assessment, assess
from campaignctl.core.cost import campaign_spend
from campaignctl.core.decide import Decision
from campaignctl.core.ladder import (
    LadderState,
    TaskEnd,
    ladder_state,
    promoted_by_rung,
    promotion_block,
    promotion_cost,
    promotion_decisions,
    promotion_shortfall,
    unstarted_label,
)
from campaignctl.services.rules import CampaignContext, budget_of


@dataclass(frozen=True, slots=True)
class LadderStep:
    state: LadderState | None  # None: the campaign has no rungs
    decisions: list[Decision] = field(default_factory=list)

    def complete(self, started: int, tasks: int) -> bool:
        """Every task that will ever run has started (and, with rungs, settled and been ranked)."""
        return self.state.complete if self.state is not None else started == tasks


def ladder_step(ctx: CampaignContext, paused: bool) -> LadderStep:
    if not ctx.settings.get("rungs"):
        return LadderStep(None)
    state = _ladder(ctx, ranked=False)  # metrics are read only once a rung is due
    if state.plan is None or paused:  # a paused campaign promotes nothing until it is resumed
        return LadderStep(state)
    state = _ladder(ctx, ranked=True)
    assert state.plan is not None
    if state.plan.from_rung not in forced_rungs(ctx.log, ctx.record.id):
        block = promotion_block(state.plan, promotion_cost(state.plan, ctx.settings, ctx.policy.prices),
                                _assessment(ctx))
        if block is not None:
            return LadderStep(state, [block])
    return LadderStep(state, promotion_decisions(state.plan, ctx.settings))


@dataclass(frozen=True, slots=True)
class Gate:
    """The promotion the budget gate holds: out of `rung` into `to_rung`; `shortfall` says why
    it still cannot pass ('' when the budget now pays for it)."""

    rung: int
    to_rung: int
    shortfall: str


def promotion_gate(ctx: CampaignContext) -> Gate | None:
    """For `resume`: the promotion due now and whether the budget pays for it (None: none due)."""
    if not ctx.settings.get("rungs"):
        return None
    state = _ladder(ctx, ranked=True)
    if state.plan is None:
        return None
    cost = promotion_cost(state.plan, ctx.settings, ctx.policy.prices)
    return Gate(state.plan.from_rung, state.plan.to_rung, promotion_shortfall(state.plan, cost, _assessment(ctx)))


def forced_rungs(log: DecisionLog, campaign_id: int) -> set[int]:
    """Rungs whose promotion a person let past the budget gate (`resume --force`, a logged release)."""
    rungs = set()
    for e in log.entries(campaign_id, actions=("release",)):
        gate = e.inputs.get("promotion")
        if e.mode == "enforce" and isinstance(gate, dict) and gate.get("forced"):
            rungs.add(int(gate["rung"]))
    return rungs


def _ladder(ctx: CampaignContext, ranked: bool) -> LadderState:
    ends = _task_ends(ctx)
    decided = set(promotions(ctx.log, ctx.record.id))
    state = ladder_state(ctx.settings, ends, {}, decided)
    if not ranked or state.plan is None:
        return state
    curves = MetricsStore(ctx.store.engine).curves(ctx.record.id, state.plan.rule.metric)
    return ladder_state(ctx.settings, ends, curves, decided)


def _assessment(ctx: CampaignContext) -> Assessment:
    return assess(budget_of(ctx.settings), campaign_spend(ctx.store.usage_groups(ctx.record.id), ctx.policy.prices))


def _task_ends(ctx: CampaignContext) -> dict[int, TaskEnd]:
    answers = {e.attempt_token: e.action for e in ctx.log.entries(ctx.record.id, actions=("give_up", "stop"))
               if e.mode == "enforce"}
    latest = {a.task_index: a for a in ctx.store.attempts(ctx.record.id)
              if a.submission_state != "abandoned" or a.token in answers}
    return {i: TaskEnd(i, a.token, a.state, answers.get(a.token, "")) for i, a in latest.items()}


def promotions(log: DecisionLog, campaign_id: int) -> dict[int, int]:
    """Rung → how many configs it promoted, for every rung whose promotion has been decided."""
    entries = log.entries(campaign_id, actions=("promote", "retire"))
    return promoted_by_rung((e.action, e.mode, e.inputs) for e in entries)


def unstarted_labels(log: DecisionLog, campaign_id: int, settings: Mapping[str, Any]) -> Callable[[int], str | None]:
    """What to call a task that never started: NOT_PROMOTED when its config was not kept."""
    if not settings.get("rungs"):
        return lambda _task: None
    decided = set(promotions(log, campaign_id))
    return lambda task: unstarted_label(task, settings, decided)

