"""A search's section of the tick: tell the sampler each trial that settled, then ask it for the
trials the free slots, the budget and the trial count allow. Pure: the sampler is handed in.

- A trial is told once, when its task settles for good: COMPLETED with the metric → its final
  value; COMPLETED without it, or given up → failed; stopped early → pruned. A trial that Slurm
  preempted or a node failure killed is retried by the cause rules as the same trial (its retry
  keeps the asked params) and told when that retry settles: never a new sample in its place.
- Asking: into the free slots (`parallel` less the search's tasks pending or running), never while
  the campaign is paused, and only as many as what remains of the budget (after spent, committed
  and projected work) pays for at a trial's time limit. With rungs, promotions (core/tuning/asha.py)
  take the free slots first, behind the same gate. When the budget cannot pay for the next and
  nothing runs, the campaign is held (paused), as a grid's promotion it cannot pay for is: raise
  the budget and `campaignctl resume`.
- The trials the sampler saw are the ask's evidence; the sampler is rebuilt from the log on
  every tick, so `policy replay` asks the same trials from the same log (adapters/optuna_sampler.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from campaignctl.core.decisions.action_records import ActionRecord, Ask, Hold, Promote, Tell
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.model.params import SCALAR_TYPES, Scalar
from campaignctl.core.model.training_metrics import Curve, final_value
from campaignctl.core.policy.policy import Prices
from campaignctl.core.resources import Resources
from campaignctl.core.spec.rungs import Rung
from campaignctl.core.spec.search_spec import SearchSpec
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.tick.budget import CAMPAIGN_TASK, CAMPAIGN_TOKEN, UNITS, Assessment
from campaignctl.core.tick.early_stop import ACTION as EARLY_STOP_ACTION
from campaignctl.core.tuning.asha import Promotable, promotable, promoting_metrics
from campaignctl.core.tuning.ladder import TaskEnd
from campaignctl.core.usage.cost import hourly

RULE = "search"
RUNNING, COMPLETE, FAIL, PRUNED = "RUNNING", "COMPLETE", "FAIL", "PRUNED"
NOT_ASKED = "NOT_ASKED"  # a trial the sampler has not been asked for yet (status, results)


@dataclass(frozen=True, slots=True)
class Trial:
    number: int  # its task index
    params: Mapping[str, Scalar]  # the sampled values (the fixed ones are the spec's)
    state: str = RUNNING  # RUNNING (asked, not told) | COMPLETE | FAIL | PRUNED
    value: float | None = None  # COMPLETE: the metric's final value
    generation: int | None = None  # CMA-ES: the generation it was asked in
    after: int | None = None  # asked ahead: the trial it was queued behind


class Sampler(Protocol):
    def ask(self, search: SearchSpec, trials: Sequence[Trial], count: int) -> list[dict[str, Scalar]]:
        """`count` new trials' sampled values, given every trial so far (told and running), in
        number order. The same search and trials ask the same values."""
        ...

    def generation(self, search: SearchSpec, trials: Sequence[Trial]) -> int | None:
        """The generation the next asks belong to, for a sampler whose state moves in generations
        (CMA-ES), logged with each ask so the state can be derived again; None for the others."""
        ...


@dataclass(frozen=True, slots=True)
class SearchPlan:
    decisions: list[Decision] = field(default_factory=list)
    pause: bool = False  # a hold: the budget cannot pay for the next trial and nothing runs
    complete: bool = False  # every trial asked, nothing pending or running, nothing left to promote


def trials_of(logged: Iterable[tuple[int, ActionRecord]]) -> tuple[Trial, ...]:
    """The trials from the log's enforced ask and tell decisions, (task, params record) oldest first."""
    trials: dict[int, Trial] = {}
    for task, p in logged:
        if isinstance(p, Ask):
            trials[task] = Trial(task, {k: v for k, v in p.params.items() if isinstance(v, SCALAR_TYPES)},
                                 generation=p.generation, after=p.after_trial)
        elif isinstance(p, Tell) and task in trials:
            trials[task] = replace(trials[task], state=p.state or FAIL, value=p.value)
    return tuple(trials[k] for k in sorted(trials))


def to_tell(trials: Sequence[Trial], ends: Mapping[int, TaskEnd], given_up: Iterable[str]) -> list[TaskEnd]:
    """The latest attempts of asked trials that settled (or are given up this tick), not told yet."""
    gone = set(given_up)
    return [end for t in trials if t.state == RUNNING and (end := ends.get(t.number)) is not None
            and (end.settled or end.token in gone)]


def search_metrics(settings: CampaignSettings, trials: Sequence[Trial], ends: Mapping[int, TaskEnd],
                   paused: bool) -> set[str]:
    """The metrics a search's tick reads: its own when a completed trial is to be told; with
    rungs, the promoting ones while something could be promoted (not paused, a completed task in
    a rung below the top)."""
    search = settings.search
    if search is None:
        return set()
    out = {search.metric} if any(e.state == "COMPLETED" for e in to_tell(trials, ends, ())) else set()
    below_top = (len(settings.rungs) - 1) * search.trials
    if settings.rungs and not paused and any(i < below_top and e.state == "COMPLETED" for i, e in ends.items()):
        out |= promoting_metrics(settings.rungs)
    return out


def search_decisions(search: SearchSpec, trials: Sequence[Trial], ends: Mapping[int, TaskEnd],
                     given_up: Iterable[str], curves: Mapping[str, Mapping[int, Curve]], sampler: Sampler | None,
                     paused: bool, trial_resources: Resources | None, prices: Prices,
                     assessment: Assessment | None, rungs: tuple[Rung, ...] = ()) -> SearchPlan:
    """Tell, then promote (a search with rungs: core/tuning/asha.py), then ask, into the free slots:
    `parallel` less the search's tasks pending or running, at any rung."""
    told_curves = curves.get(search.metric, {})
    tells = [_tell(end, search, told_curves.get(end.task_index)) for end in to_tell(trials, ends, given_up)]
    told = {d.task_index: d.typed for d in tells if isinstance(d.typed, Tell)}
    now = [t if t.number not in told else replace(t, state=told[t.number].state, value=told[t.number].value)
           for t in trials]
    gone = set(given_up)
    active = sum(1 for e in ends.values() if not e.settled and e.token not in gone)
    at_end = len(now) == search.trials and active == 0
    ladder = promotable(rungs, search.trials, ends, curves, at_end, search.promotion == "sync") if rungs else []
    if paused or sampler is None or trial_resources is None:
        return SearchPlan(tells, complete=at_end and not ladder)
    free = max(0, search.parallel - active)
    promoting = ladder[:free]
    asking = max(0, min(free - len(promoting), search.trials - len(now)))
    leaders = _ahead_of(search, now, ends, gone)[:max(0, search.trials - len(now) - asking)]
    wanted = [rungs[p.from_rung + 1].resources for p in promoting] + [trial_resources] * (asking + len(leaders))
    if not wanted:
        return SearchPlan(tells, complete=at_end and not ladder)
    afford, short = _affordable(wanted, prices, assessment)
    if afford == 0:
        if active:
            return SearchPlan(tells)  # what runs now is committed at its limit: wait for it to end
        return SearchPlan([*tells, _hold(len(now), short, assessment, bool(promoting))], pause=True)
    by_number = {t.number: t for t in now}
    promoted = [_promote(p, search, by_number, rungs) for p in promoting[:afford]]
    count = afford - len(promoted)
    if not count:
        return SearchPlan([*tells, *promoted])
    inside = [_inside(t, search) for t in now]
    asked = sampler.ask(search, inside, count)
    seen = {**_seen(now), "outside_space": sum(a != b for a, b in zip(now, inside, strict=True))}
    generation = sampler.generation(search, inside)
    behind = [None] * asking + leaders  # the asks past the free slots are queued behind running trials
    return SearchPlan([*tells, *promoted, *(_ask(len(now) + i, values, search, seen, asking + len(leaders), count,
                                                 trial_resources, generation, behind[i])
                                            for i, values in enumerate(asked))])


def _ahead_of(search: SearchSpec, trials: Sequence[Trial], ends: Mapping[int, TaskEnd],
              gone: set[str]) -> list[TaskEnd]:
    """The running trials a trial asked ahead now would be queued behind (`ahead:`), first asked
    first: each has a job element to depend on and no queued trial behind it yet, and there are at
    most `ahead` queued. Slurm starts a queued trial the moment the one before it ends
    (`--dependency=afterany`), with no tick in between; the tick then asks the next one. A trial
    is queued while it waits (not RUNNING) behind the one it was asked after."""
    if not search.ahead:
        return []
    def live(e: TaskEnd | None) -> bool:
        return e is not None and not e.settled and e.token not in gone
    queued = [t for t in trials if t.after is not None and live(e := ends.get(t.number))
              and e is not None and e.state != "RUNNING"]
    taken = {t.after for t in queued}
    leaders = [e for t in trials if live(e := ends.get(t.number)) and e is not None and e.state == "RUNNING"
               and e.job_id and t.number not in taken]
    return leaders[:max(0, search.ahead - len(queued))]


def _promote(p: Promotable, search: SearchSpec, trials: Mapping[int, Trial], rungs: tuple[Rung, ...]) -> Decision:
    target = rungs[p.from_rung + 1]
    rule = rungs[p.from_rung].promote
    assert rule is not None
    at_end = " (the search's last results: at least one goes on)" if p.keep > p.results / (rule.eta or 1) else ""
    reason = (f"trial {p.trial}: {rule.metric} {p.value:.6g} ranks {p.rank} of the {p.results} result(s) of rung "
              f"{rungs[p.from_rung].name} so far, in the top {p.keep} (1/{rule.eta:g}){at_end}: promoted to rung "
              f"{target.name}.")
    sampled = trials[p.trial].params if p.trial in trials else {}
    return Decision((p.from_rung + 1) * search.trials + p.trial, p.token, RULE, "promote", reason,
                    {"rung": p.from_rung, "value": p.value, "rank": p.rank, "results": p.results, "keep": p.keep,
                     "metric": rule.metric, "goal": rule.goal, "eta": rule.eta},
                    Promote(config=p.trial, from_rung=p.from_rung, to_rung=p.from_rung + 1, params=dict(sampled)),
                    target.resources)


def _tell(end: TaskEnd, search: SearchSpec, curve: Curve | None) -> Decision:
    value = final_value(curve) if curve else None
    if end.state == "COMPLETED" and value is not None:
        state, why = COMPLETE, f"completed with final {search.metric} {value:.6g}"
    elif end.answer == EARLY_STOP_ACTION:
        state, why = PRUNED, "stopped early by early_stopping: told pruned, not as a value"
    elif end.state == "COMPLETED":
        state, why = FAIL, f"completed without reporting {search.metric}: told failed"
    else:
        state, why = FAIL, f"{end.state.lower()} and given up: told failed, not as a value"
    return Decision(end.task_index, end.token, RULE, "tell", f"trial {end.task_index} {why}.",
                    {"state": end.state, "answer": end.answer, "metric": search.metric,
                     "points": len(curve) if curve else 0},
                    Tell(trial=end.task_index, state=state, value=value if state == COMPLETE else None))


def _affordable(wanted: Sequence[Resources], prices: Prices, assessment: Assessment | None) -> tuple[int, str]:
    """How many of `wanted` (in order) the budget pays for at their time limits, and why not more:
    each must fit what remains after spent, committed, projected and those before it."""
    if assessment is None:
        return len(wanted), ""
    used: dict[str, float] = {}
    for n, resources in enumerate(wanted):
        one = hourly(resources, "", prices).times(resources.time_min / 60)
        for line in assessment.lines:
            cost = one.get(line.dimension)
            left = line.remaining - line.projected - used.get(line.dimension, 0.0)
            if cost > 0 and cost > left + 1e-12:
                unit = UNITS[line.dimension]
                return n, (f"the next costs up to {cost:.4g}{' ' + unit if unit else ''} of {line.dimension} at "
                           f"its time limit, and {max(left, 0):.4g} of {line.limit:g} remains")
        for line in assessment.lines:
            used[line.dimension] = used.get(line.dimension, 0.0) + one.get(line.dimension)
    return len(wanted), ""


def _hold(asked: int, short: str, assessment: Assessment | None, promoting: bool) -> Decision:
    what = "the next promotion" if promoting else f"trial {asked}"
    reason = (f"the budget cannot pay for {what}: {short}; the campaign is paused until the budget "
              "is raised and `campaignctl resume` is run.")
    return Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, RULE, "hold", reason,
                    {"asked": asked, "budget": assessment.to_dict() if assessment else {}}, Hold())


def _inside(trial: Trial, search: SearchSpec) -> Trial:
    """The trial as today's space sees it: a value a revision's space no longer holds is left
    out, so the sampler sees the trial along the dimensions it still fits (or not at all)."""
    space = {d.name: d for d in search.space}
    kept = {k: v for k, v in trial.params.items() if k in space and space[k].contains(v)}
    return trial if len(kept) == len(trial.params) else replace(trial, params=kept)


def _seen(trials: Sequence[Trial]) -> dict[str, object]:
    """The evidence of an ask: the trials the sampler saw, counted, with a digest of all of them."""
    running = [t.number for t in trials if t.state == RUNNING]
    digest = hashlib.sha256(json.dumps([[t.number, dict(t.params), t.state, t.value] for t in trials],
                                       sort_keys=True).encode()).hexdigest()[:16]
    return {"told": len(trials) - len(running), "running": running,
            "complete": sum(1 for t in trials if t.state == COMPLETE), "seen_digest": digest}


def _ask(number: int, values: Mapping[str, Scalar], search: SearchSpec, seen: Mapping[str, object],
         want: int, afford: int, resources: Resources, generation: int | None, behind: TaskEnd | None) -> Decision:
    shown = ", ".join(f"{k}={_short(v)}" for k, v in values.items())
    budget = f"; the budget pays for {afford} of the {want} trials the free slots allow" if afford < want else ""
    running = seen["running"]
    outside = seen.get("outside_space") or 0
    moved = f" ({outside} of them with values outside today's space, seen only where they fit it)" if outside else ""
    queued = f", queued behind trial {behind.task_index} (job {behind.job_id})" if behind else ""
    reason = (f"trial {number} of {search.trials} asked of the {search.sampler} sampler after {seen['told']} told "
              f"and {len(running) if isinstance(running, list) else 0} running{moved}{budget}{queued}: {shown}.")
    return Decision(number, f"trial.{number}", RULE, "ask", reason,
                    {**seen, "sampler": search.sampler, "seed": search.seed},
                    Ask(trial=number, params=dict(values), generation=generation, after=behind.job_id if behind else "",
                        after_trial=behind.task_index if behind else None), resources)


def _short(value: Scalar) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
