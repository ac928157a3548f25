"""Progressive campaigns (successive halving on job arrays): which rung a task belongs to, and
when and whom to promote into the next rung. Pure.

Tasks of a campaign with `rungs` are numbered rung by rung: config c of rung r is task
r × configs + c, so rung 0 is exactly the configs of the matrix, in their order.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from campaignctl.core.decisions.action_records import ActionRecord, Hold, Promote, Retire
from campaignctl.core.decisions.answers import SETTLING
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.model.training_metrics import Curve, best_until, better, describe, final_value, last_step
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.slurm.observe import FINAL, UNKNOWN
from campaignctl.core.spec.rungs import Promotion
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.tick.budget import CAMPAIGN_TASK, CAMPAIGN_TOKEN, UNITS, Assessment
from campaignctl.core.usage.cost import DIMENSIONS, Amount, hourly


def rung_of(task_index: int, settings: CampaignSettings) -> int:
    return task_index // settings.configs if settings.configs else 0


def config_of(task_index: int, settings: CampaignSettings) -> int:
    return task_index % settings.configs if settings.configs else task_index


def rung_names(settings: CampaignSettings) -> list[str]:
    """Rung names in order; a campaign without rungs has one unnamed rung."""
    return [r.name or f"rung{r.number}" for r in settings.rungs] or [""]


# --- promotion ------------------------------------------------------------------------------

RULE = "promotion"


@dataclass(frozen=True, slots=True)
class TaskEnd:
    """A task's latest attempt, as far as the ladder cares."""

    task_index: int
    token: str
    state: str  # domain state of the latest attempt
    answer: str = ""  # the logged decision that answered it for good: give_up | stop | ''
    reading: bool = False  # its metrics file holds lines a tick's read cap left for the next ticks
    job_id: str = ""  # `<array job>_<index>` once submitted: what a trial asked ahead is queued behind

    @property
    def settled(self) -> bool:
        """Ended for good, and its metrics all read: a promotion or a search's tell reads its final value."""
        ended = self.state == "COMPLETED" or (self.state in FINAL | {UNKNOWN} and self.answer in SETTLING)
        return ended and not self.reading


def task_ends(latest: Iterable[tuple[int, str, str, str]], answers: Mapping[str, str],
              reading: Collection[str] = ()) -> dict[int, TaskEnd]:
    """Every started task's latest attempt, (task, token, state, job id), with the answer that
    ended it for good (`answers`: attempt token → give_up | stop) and whether its metrics are still
    being read (`reading`: tokens): what the live tick, `policy replay` and the simulator each
    know of their attempts, made into TaskEnds in one place."""
    return {task: TaskEnd(task, token, state, answers.get(token, ""), token in reading, job_id)
            for task, token, state, job_id in latest}


@dataclass(frozen=True, slots=True)
class Standing:
    """One config at the end of a rung: its final metric, and why it cannot be promoted ('' if it can)."""

    config: int
    task_index: int
    token: str
    value: float | None
    why_not: str = ""
    rank: int | None = None  # 1 = best, among the configs that can be promoted


@dataclass(frozen=True, slots=True)
class PromotionPlan:
    from_rung: int
    to_rung: int
    rule: Promotion
    standings: tuple[Standing, ...]  # by config
    survivors: tuple[int, ...]  # configs, best first
    keep: int | None  # eta: how many the rule keeps


@dataclass(frozen=True, slots=True)
class LadderState:
    rung: int  # the highest rung that has started
    complete: bool  # every rung that will ever run has run: the campaign may finish
    plan: PromotionPlan | None = None  # promote now (all of `rung` settled, not yet decided)
    waiting: int = 0  # tasks of `rung` still to settle


def ladder_state(settings: CampaignSettings, ends: Mapping[int, TaskEnd], curves: Mapping[int, Curve],
                 decided_rungs: Collection[int]) -> LadderState:
    """Where a progressive campaign stands. `ends`: every started task's latest attempt;
    `curves`: the promoting metric per task; `decided_rungs`: rungs whose promotion is logged."""
    rungs = settings.rungs
    current = max((rung_of(i, settings) for i in ends), default=0)
    unsettled = sum(1 for i, end in ends.items() if rung_of(i, settings) == current and not end.settled)
    if unsettled or not ends:
        return LadderState(current, False, waiting=unsettled)
    if current == len(rungs) - 1 or current in decided_rungs:
        return LadderState(current, True)
    promote = rungs[current].promote
    assert promote is not None  # every rung but the last has one (spec validation)
    standings = _standings(settings, current, ends, curves, promote)
    survivors, keep = _select(standings, promote)
    return LadderState(current, False, PromotionPlan(current, current + 1, promote, standings, survivors, keep))


def _standings(settings: CampaignSettings, rung: int, ends: Mapping[int, TaskEnd],
               curves: Mapping[int, Curve], promote: Promotion) -> tuple[Standing, ...]:
    out = []
    for i in sorted(i for i in ends if rung_of(i, settings) == rung):
        end, value = ends[i], rung_value(curves.get(i, ()), promote)
        if end.state != "COMPLETED":
            why = "stopped early" if end.answer == "stop" else f"ended {end.state}"
        else:
            why = "" if value is not None else f"reported no {promote.metric}"
        out.append(Standing(config_of(i, settings), i, end.token, value, why))
    ranked = sorted((s for s in out if not s.why_not), key=lambda s: (_key(s.value, promote.goal), s.config))
    rank = {s.config: n for n, s in enumerate(ranked, 1)}
    return tuple(replace(s, rank=rank.get(s.config)) for s in out)


def rung_value(curve: Curve, promote: Promotion) -> float | None:
    """What a config is ranked by: the last value it reported in the rung, or its best one."""
    if promote.by == "best":
        step = last_step(curve)
        return None if step is None else best_until(curve, step, promote.goal)
    return final_value(curve)


def _key(value: float | None, goal: str) -> float:
    assert value is not None
    return value if goal == "min" else -value


def _select(standings: Sequence[Standing], promote: Promotion) -> tuple[tuple[int, ...], int | None]:
    """Ties at the cut go to the lower config index (a stable, documented order)."""
    ranked = sorted((s for s in standings if s.rank is not None), key=lambda s: s.rank or 0)
    if promote.eta is not None:
        keep = max(1, math.floor(len(standings) / promote.eta + 1e-9))
        return tuple(s.config for s in ranked[:keep]), keep
    threshold = promote.threshold
    assert threshold is not None
    return tuple(s.config for s in ranked if s.value is not None and not better(threshold, s.value, promote.goal)), None


def promotion_decisions(plan: PromotionPlan, settings: CampaignSettings) -> list[Decision]:
    """One `promote` per survivor (its task in the next rung, to be submitted as a new array
    with that rung's resources) and one `retire` per config left behind, each with the ranking."""
    configs = settings.configs
    source, target = settings.rungs[plan.from_rung], settings.rungs[plan.to_rung]
    ranking = describe({s.config: s.value for s in plan.standings})
    shared = {"rung": plan.from_rung, "to_rung": plan.to_rung, "metric": plan.rule.metric, "goal": plan.rule.goal,
              "by": plan.rule.by, "eta": plan.rule.eta, "threshold": plan.rule.threshold, "keep": plan.keep,
              "configs": len(plan.standings), "eligible": sum(1 for s in plan.standings if s.rank), "ranking": ranking}
    survivors = set(plan.survivors)
    out = []
    for s in plan.standings:
        inputs = {**shared, "config": s.config, "value": s.value, "rank": s.rank}
        standing = _describe(s, plan, source.name)
        if s.config in survivors:
            out.append(Decision(plan.to_rung * configs + s.config, s.token, RULE, "promote",
                                f"{standing}; kept by {plan.rule.describe()}: promoted to rung {target.name}.",
                                inputs, Promote(config=s.config, from_rung=plan.from_rung, to_rung=plan.to_rung),
                                target.resources))
        else:
            out.append(Decision(s.task_index, s.token, RULE, "retire",
                                f"{standing}; not kept by {plan.rule.describe()}: not promoted.", inputs,
                                Retire(config=s.config, from_rung=plan.from_rung)))
    return out


def _describe(s: Standing, plan: PromotionPlan, rung_name: str) -> str:
    if s.why_not:
        return f"config {s.config} {s.why_not} in rung {rung_name}"
    metric = plan.rule.metric if plan.rule.by == "last" else f"best {plan.rule.metric}"
    return (f"config {s.config}: {metric} {s.value:.6g} ranks {s.rank} of "
            f"{sum(1 for x in plan.standings if x.rank)} in rung {rung_name}")


def promotion_cost(plan: PromotionPlan, settings: CampaignSettings, prices: Prices) -> Amount:
    """What the next rung costs at its time limit: survivors × its resources × its hours."""
    resources = settings.rungs[plan.to_rung].resources
    return hourly(resources, "", prices).times(resources.time_min / 60 * len(plan.survivors))


def promotion_shortfall(plan: PromotionPlan, cost: Amount, assessment: Assessment) -> str:
    """Why the budget cannot pay for the promotion ('' when it can): the next rung's projected
    cost must fit what remains after spent, committed and already projected work."""
    short = [line for line in assessment.lines if line.remaining - line.projected < cost.get(line.dimension) - 1e-12]
    if not short:
        return ""
    first = short[0]
    unit = UNITS[first.dimension]
    return (f"promotion of {len(plan.survivors)} config(s) into rung {plan.to_rung} would cost up to "
            f"{cost.get(first.dimension):.4g}{' ' + unit if unit else ''} but only "
            f"{first.remaining - first.projected:.4g} of {first.limit:g} remains")


def promotion_block(plan: PromotionPlan, cost: Amount, assessment: Assessment) -> Decision | None:
    """The budget gates promotion. If it cannot pay, hold: pause the campaign (no element to
    hold; `campaignctl resume` after raising the budget tries again, `resume --force` lets it pass)."""
    shortfall = promotion_shortfall(plan, cost, assessment)
    if not shortfall:
        return None
    reason = (f"{shortfall}; the campaign is paused until the budget is raised and `campaignctl resume` is run.")
    return Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, RULE, "hold", reason,
                    {"rung": plan.from_rung, "to_rung": plan.to_rung, "survivors": list(plan.survivors),
                     "cost": {d: round(cost.get(d), 6) for d in DIMENSIONS}, "budget": assessment.to_dict()},
                    Hold())


# --- progress, for status -------------------------------------------------------------------

NOT_PROMOTED = "NOT_PROMOTED"  # a later-rung task of a config its rung did not keep


@dataclass(frozen=True, slots=True)
class RungProgress:
    number: int
    name: str
    started: int  # configs that have run (or are running) in this rung
    states: dict[str, int]  # latest-attempt states of those
    promoted: int | None  # configs promoted out of this rung; None until decided (or the last rung)
    rule: str  # how it promotes ('' for the last rung)

    def describe(self) -> str:
        states = ", ".join(f"{k} {v}" for k, v in sorted(self.states.items())) or "not started"
        kept = f" → {self.promoted} promoted" if self.promoted is not None else ""
        return f"{self.name} [{states}]{kept}"


def ladder_progress(settings: CampaignSettings, states: Mapping[int, str],
                    promoted_from: Mapping[int, int]) -> list[RungProgress]:
    """Per rung: what ran and how it ended, and how many it promoted. `states`: latest state of
    every started task; `promoted_from`: rung → configs promoted out of it (decided rungs only)."""
    out = []
    for rung in settings.rungs:
        mine = [s for i, s in states.items() if rung_of(i, settings) == rung.number]
        counts: dict[str, int] = {}
        for s in mine:
            counts[s] = counts.get(s, 0) + 1
        out.append(RungProgress(rung.number, rung.name, len(mine), counts, promoted_from.get(rung.number),
                                rung.promote.describe() if rung.promote else ""))
    return out


def unstarted_label(task_index: int, settings: CampaignSettings, decided_rungs: Collection[int]) -> str | None:
    """NOT_PROMOTED for a task whose config its previous rung did not keep; None otherwise."""
    rung = rung_of(task_index, settings)
    return NOT_PROMOTED if rung > 0 and rung - 1 in decided_rungs else None


def promoted_by_rung(decisions: Iterable[tuple[str, ActionRecord]]) -> dict[int, int]:
    """(mode, typed params) of logged decisions → rung → how many configs it promoted, for every
    rung whose promotion has been decided (enforced `promote`/`retire` decisions)."""
    out: dict[int, int] = {}
    for mode, p in decisions:
        if isinstance(p, (Promote, Retire)) and mode == "enforce":
            out[p.from_rung] = out.get(p.from_rung, 0) + isinstance(p, Promote)
    return out

