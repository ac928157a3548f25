"""One campaign's tick, decided: every rule over one snapshot of what the tick read. Pure.

The shell (services/tick_snapshot.py) reads a `TickSnapshot` once, asks `needs` which lazy facts
this tick needs (squeue reasons and free GPUs, metric curves), fills them in, calls `decide_tick`,
carries out the plan and records it. Reconcile, a candidate (shadow) policy and `policy replay`
all decide through `decide_tick`; the simulator does too.

Sections, in this order, over the views with their standing requests (resize_next, cancel, stop):
1. causes: per-cause retries, give-ups and pending resizes (`decide`), leaving out the nodes the
   node ledger excludes (core/nodes/ledger.py: read only when something may be submitted or
   resized; unread, it excludes nothing);
2. budget: the spend assessed ONCE: alerts, an admission cap, or a hold that pauses the campaign;
   else the crash-loop breaker's hold (core/nodes/crash_loop.py); a paused campaign (already, or
   by either hold) keeps only the give-ups of 1;
3. utilisation, GPU-type fallback and right_size's in-place lowering (not while paused; fallback
   reads squeue's pending reasons and sinfo's free GPUs, only when a task has waited
   `fallback.after`; right_size reads the campaign's ended attempts only when a task is pending);
4. early stopping (paused too: a stop spends nothing; reads the metric's curves only when a task
   it could stop runs);
5. ladder: promotion out of a settled rung, behind the budget gate of 2's assessment (not while
   paused; reads the rung's metric only when a promotion is due);
   search: tells the trials that settled (paused too), asks for new ones behind the same budget
   gate (not while paused; reads the metric only when a trial is to be told; core/tuning/search.py);
6. throttles: max_parallel, tightened by the budget's cap (not while paused); then the node
   evidence and clean slates of this tick (core/nodes/evidence.py; paused too);
7. governance: shadow rules' decisions become proposals (once per attempt), the rest pass the
   approval gate; then the current revision's known-good mark;
8. expiry: decisions that waited for approval longer than approval.expire_after (those 7 gates
   have waited 0 s);
9. candidate: a shadow candidate policy runs sections 1-6 over the same views, as proposals;
10. starts: the tasks the campaign starts with that have no attempt yet (a new campaign's, a
    revision's added ones, a crashed submit's), one `start` per array (core/tick/starts.py), past
    governance: the spec asked for them, whatever the policy's mode;
11. finished: every task that will ever run has run and settled (or is given up by 1), unless an
    answered attempt is still unresolved after acting (`finished`), and none starts now.
There is one clock: `now`, the tick's UTC time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from campaignctl.core.decisions.action_records import KnownGood
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.decisions.requests import with_requests
from campaignctl.core.governance.governance import (
    Awaiting,
    apply_modes,
    as_candidate,
    expired,
    gate,
    known_good_verdict,
    proposal_key,
)
from campaignctl.core.nodes.crash_loop import crash_loop
from campaignctl.core.nodes.evidence import node_decisions
from campaignctl.core.nodes.ledger import NO_EXCLUSION, probing_of
from campaignctl.core.packing.packing import own_decisions
from campaignctl.core.placement.moves import decide_moves
from campaignctl.core.policy.policy import Policy
from campaignctl.core.slurm.observe import is_settled
from campaignctl.core.tick import fallback
from campaignctl.core.tick.budget import CAMPAIGN_TASK, CAMPAIGN_TOKEN, Assessment, BudgetPlan, assess, guard
from campaignctl.core.tick.decide import decide
from campaignctl.core.tick.early_stop import decide_early_stops, stoppable
from campaignctl.core.tick.right_size import groups, plan_lowering
from campaignctl.core.tick.siblings import trigger_of
from campaignctl.core.tick.starts import decide_starts
from campaignctl.core.tick.throttle import loads_of, plan_throttles
from campaignctl.core.tick.tick_facts import Curves, Needs, TickSnapshot
from campaignctl.core.tick.utilisation import decide_utilisation
from campaignctl.core.tuning.ladder import (
    LadderState,
    ladder_state,
    promotion_block,
    promotion_cost,
    promotion_decisions,
    promotion_shortfall,
    rung_of,
)
from campaignctl.core.tuning.search import SearchPlan, search_decisions, search_metrics
from campaignctl.core.usage.cost import campaign_spend

KNOWN_GOOD = "mark_known_good"  # the action of a known-good mark (a decision of the revision rule)


class MissingFact(ValueError):
    """decide_tick was given a snapshot without a lazy fact `needs` asks for."""


@dataclass(frozen=True, slots=True)
class TickPlan:
    decisions: tuple[Decision, ...]  # the enforced policy's, in section order, governed; the known-good mark last
    proposals: tuple[Decision, ...]  # the candidate policy's, every one mode shadow
    expired: tuple[int, ...]  # ids of awaiting decisions to close as expired
    expire_gated: bool  # the decisions this plan gates expire at once too (approval.expire_after 0)
    paused: bool  # the campaign was paused, or this tick's budget hold pauses it
    max_parallel: int | None  # the campaign's cap this tick: max_parallel tightened by the budget's
    retry_parallel: int | None  # what a retry array starts throttled to (the cap minus running)
    assessment: Assessment | None  # the budget, assessed once (None: no limits)
    ladder: LadderState | None  # None: no rungs
    finishing: frozenset[str] | None  # None: not finished; else finished unless one of these
    #                                   latest attempts is unresolved after acting (`finished`)


@dataclass(frozen=True, slots=True)
class Gate:
    """The promotion the budget gate holds: out of `rung` into `to_rung`; `shortfall` says why
    it still cannot pass ('' when the budget now pays for it)."""

    rung: int
    to_rung: int
    shortfall: str


@dataclass(frozen=True, slots=True)
class _Sections:
    decisions: list[Decision]
    budget: BudgetPlan
    assessment: Assessment | None
    paused: bool
    ladder: LadderState | None
    max_parallel: int | None
    search_complete: bool = False  # a search: every trial asked, nothing running, nothing to promote


def needs(snapshot: TickSnapshot, policy: Policy, now: datetime) -> Needs:
    """Which lazy facts decide_tick needs for this snapshot (for the enforced and the candidate policy)."""
    views = with_requests(snapshot.views, snapshot.requests)
    out = Needs(starts=snapshot.unstarted > 0)
    for p in (policy, snapshot.candidate):
        if p is None:
            continue
        assessment = _assessment(snapshot, p)
        paused = snapshot.campaign_state == "paused" or _budget(snapshot, views, assessment).pause
        queue = not paused and bool(_waiting(snapshot, p, now, views))
        lowering = not paused and _lowers(snapshot, p, views)
        metrics = {p.early_stopping.metric} if _stoppable(snapshot, p, views) else set()
        state = None if paused else _ladder(snapshot, None)
        if state is not None and state.plan is not None:
            metrics.add(state.plan.rule.metric)
        metrics |= search_metrics(snapshot.settings, snapshot.trials, snapshot.task_ends, paused)
        raises = not paused and trigger_of((v.latest.number, v.latest.state) for v in views
                                           if not v.latest.decided) is not None
        ledger = p.nodes.enabled and (snapshot.unstarted > 0 or snapshot.completed > 0 or any(
            not v.latest.decided and v.latest.state not in ("RUNNING", "COMPLETED") for v in views))
        looping = p.nodes.crash_loop_after > 0 and not paused and any(
            not v.latest.decided and v.latest.state == "FAILED" for v in views)
        out = Needs(out.queue or queue, out.metrics | metrics, out.right_size or lowering, out.siblings or raises,
                    out.starts, out.nodes or ledger, out.completions or (p.nodes.enabled and snapshot.completed > 0),
                    out.last_completed or looping, out.moves or (not paused and _movable(snapshot, p, views)))
    return out


def decide_tick(snapshot: TickSnapshot, policy: Policy, now: datetime) -> TickPlan:
    """The tick's plan (see the module's docstring for the sections' order). Raises MissingFact
    when a lazy fact `needs` asks for is not in the snapshot."""
    views = with_requests(snapshot.views, snapshot.requests)
    if snapshot.loads is None and (snapshot.settings.max_parallel or snapshot.settings.budget.limits()):
        snapshot = replace(snapshot, loads=loads_of(views))  # counted once: both policies' throttles read them
    enforced = _sections(snapshot, policy, now, views)
    decisions = gate(apply_modes(own_decisions(enforced.decisions, views), policy, snapshot.proposal_keys), policy)
    decisions += _known_good(snapshot, policy, now) + _starts(snapshot, policy, decisions)
    proposals: list[Decision] = []
    if snapshot.candidate is not None:  # a candidate proposes over the same views; it never acts
        logged = snapshot.proposal_keys | {proposal_key(policy.digest, d) for d in decisions if d.mode == "shadow"}
        proposals = as_candidate(_sections(snapshot, snapshot.candidate, now, views).decisions,
                                 snapshot.candidate, logged)
    cap = enforced.max_parallel
    late = expired(snapshot.awaiting, now, policy.approval.expire_after_s)
    gated_expire = any(d.gate for d in decisions) and bool(expired([Awaiting(0, now)], now,
                                                                   policy.approval.expire_after_s))
    retry_parallel = max(1, cap - (snapshot.loads or loads_of(views)).running) if cap else None
    return TickPlan(tuple(decisions), tuple(proposals), tuple(late), gated_expire, enforced.paused, cap,
                    retry_parallel, enforced.assessment, enforced.ladder,
                    _finishing(snapshot, views, enforced.ladder, decisions, enforced.search_complete))


def finished(plan: TickPlan, unresolved: set[str] | frozenset[str]) -> bool:
    """The campaign is finished: the plan says so and no latest attempt is answered but
    unresolved after acting (a retry Slurm refused for good, or one waiting for `approve`)."""
    return plan.finishing is not None and not plan.finishing & unresolved


def promotion_gate(snapshot: TickSnapshot, policy: Policy) -> Gate | None:
    """For `resume`: the promotion due now and whether the budget pays for it (None: none due).
    Needs the curves of `gate_needs`."""
    state = _ladder(snapshot, None)
    if state is None or state.plan is None:
        return None
    state = _ladder(snapshot, _curves(snapshot, state.plan.rule.metric))
    assert state is not None and state.plan is not None
    cost = promotion_cost(state.plan, snapshot.settings, policy.prices)
    return Gate(state.plan.from_rung, state.plan.to_rung,
                promotion_shortfall(state.plan, cost, _assessment(snapshot, policy) or assess_nothing()))


def gate_needs(snapshot: TickSnapshot) -> Needs:
    state = _ladder(snapshot, None)
    return Needs(metrics=frozenset({state.plan.rule.metric})) if state is not None and state.plan else Needs()


def assess_nothing() -> Assessment:
    """The assessment of a campaign without budget limits: nothing binds."""
    return Assessment((), 0, 0, None, False)


# --- the sections ------------------------------------------------------------------------------

def _sections(snapshot: TickSnapshot, policy: Policy, now: datetime, views: Sequence[TaskView]) -> _Sections:
    settings = snapshot.settings
    fired = snapshot.requests.fired
    ledger = snapshot.exclusion or NO_EXCLUSION  # unread: nothing excluded (the ledger fails open)
    decisions = decide(views, policy, now, settings.gpu_types, snapshot.siblings, ledger, settings.exclude,
                       snapshot.node_failures)
    assessment = _assessment(snapshot, policy)
    budget = _budget(snapshot, views, assessment)
    paused = snapshot.campaign_state == "paused" or budget.pause
    loop = None if paused else crash_loop(views, policy.nodes.crash_loop_after, snapshot.crash_looped,
                                          snapshot.last_completed)
    paused = paused or loop is not None
    if paused:  # retries, moves and throttles would spend what the budget no longer has
        decisions = [d for d in decisions if d.action == "give_up"]
    else:
        decisions += decide_utilisation(views, snapshot.summaries, policy, settings.min_gpus, fired)
        decisions += _fallbacks(snapshot, policy, now, views)
        decisions += _moves(snapshot, policy, now, views)
        decisions += _lowering(snapshot, policy, views)
    decisions += _early_stops(snapshot, policy, views)
    ladder = _ladder(snapshot, None)
    if ladder is not None and ladder.plan is not None and not paused:  # paused: promotes nothing until resumed
        ladder = _ladder(snapshot, _curves(snapshot, ladder.plan.rule.metric))
        assert ladder is not None and ladder.plan is not None
        decisions += _promotion(snapshot, policy, ladder, assessment)
    search = _search(snapshot, policy, decisions, paused, assessment)
    decisions += search.decisions
    paused = paused or search.pause
    max_parallel = _tighter(settings.max_parallel, budget.cap)
    if not paused and max_parallel:
        why = f"budget admits {budget.cap} at once" if max_parallel == budget.cap else ""
        decisions += plan_throttles(snapshot.loads or loads_of(views), snapshot.array_throttles, max_parallel, why)
    decisions += node_decisions(views, snapshot.completions or (), ledger, snapshot.suspected, policy.nodes, now)
    held = [loop] if loop is not None else []
    return _Sections(decisions + budget.decisions + held, budget, assessment, paused, ladder, max_parallel,
                     search.complete)


def _assessment(snapshot: TickSnapshot, policy: Policy) -> Assessment | None:
    budget = snapshot.settings.budget
    if not budget.limits():
        return None
    return assess(budget, campaign_spend(snapshot.usage, policy.prices))


def _budget(snapshot: TickSnapshot, views: Sequence[TaskView], assessment: Assessment | None) -> BudgetPlan:
    budget = snapshot.settings.budget
    if assessment is None:
        return BudgetPlan()
    # `resume --force` released work over these very limits: do not hold it again until they change
    forced = any(dict(limits) == budget.limits() for limits in snapshot.released_limits)
    return guard(budget, assessment, views, snapshot.campaign_state == "paused" or forced, snapshot.alerted)


def _waiting(snapshot: TickSnapshot, policy: Policy, now: datetime, views: Sequence[TaskView]) -> list[TaskView]:
    requests = snapshot.requests
    return fallback.candidates(views, snapshot.settings.gpu_types, policy, now, snapshot.pending_since,
                               requests.moves, requests.cancel_requested)


def _fallbacks(snapshot: TickSnapshot, policy: Policy, now: datetime, views: Sequence[TaskView]) -> list[Decision]:
    waiting = _waiting(snapshot, policy, now, views)
    if not waiting:
        return []
    if snapshot.pending_reasons is None or snapshot.free_gpus is None:
        raise MissingFact("GPU-type fallback needs squeue's pending reasons and sinfo's free GPUs")
    return fallback.plan_fallbacks(waiting, snapshot.settings.gpu_types, policy, snapshot.pending_reasons,
                                   snapshot.free_gpus)


def _movable(snapshot: TickSnapshot, policy: Policy, views: Sequence[TaskView]) -> bool:
    return (len(snapshot.settings.clusters) > 1 and policy.placement.move_margin_s > 0
            and any(v.latest.state == "PENDING" and not v.latest.decided for v in views))


def _moves(snapshot: TickSnapshot, policy: Policy, now: datetime, views: Sequence[TaskView]) -> list[Decision]:
    if not _movable(snapshot, policy, views):
        return []
    if snapshot.moves is None:
        raise MissingFact("moving pending work needs squeue's estimates on every cluster and their predictions")
    requests = snapshot.requests
    return decide_moves(views, snapshot.moves, policy.placement, now, requests.cluster_moves,
                        requests.cancel_requested)


def _lowers(snapshot: TickSnapshot, policy: Policy, views: Sequence[TaskView]) -> bool:
    section = policy.right_size
    return (section.enabled and section.lower and snapshot.settings.profile is not None
            and any(v.latest.state == "PENDING" for v in views))


def _lowering(snapshot: TickSnapshot, policy: Policy, views: Sequence[TaskView]) -> list[Decision]:
    if not _lowers(snapshot, policy, views):
        return []
    if snapshot.samples is None:
        raise MissingFact("right_size needs the campaign's ended attempts")
    return plan_lowering(views, snapshot.samples, policy.right_size, groups(snapshot.settings, views),
                         snapshot.lowered)


def _stoppable(snapshot: TickSnapshot, policy: Policy, views: Sequence[TaskView]) -> list[TaskView]:
    return stoppable(views, snapshot.requests.fired) if policy.early_stopping.enabled else []


def _early_stops(snapshot: TickSnapshot, policy: Policy, views: Sequence[TaskView]) -> list[Decision]:
    section = policy.early_stopping
    running = _stoppable(snapshot, policy, views)
    if not running:
        return []
    curves = _curves(snapshot, section.metric)
    rungs = {task: rung_of(task, snapshot.settings) for task in curves}
    return decide_early_stops(running, curves, rungs, section, snapshot.requests.fired)


def _ladder(snapshot: TickSnapshot, curves: Curves | None) -> LadderState | None:
    """Where a progressive campaign stands (None without rungs, or for a search: its rungs promote
    asynchronously, core/tuning/asha.py); ranked only when given curves."""
    if not snapshot.settings.progressive or snapshot.settings.search:
        return None
    return ladder_state(snapshot.settings, snapshot.task_ends, curves or {}, snapshot.promoted_rungs)


def _promotion(snapshot: TickSnapshot, policy: Policy, ladder: LadderState,
               assessment: Assessment | None) -> list[Decision]:
    plan = ladder.plan
    assert plan is not None
    if plan.from_rung not in snapshot.forced_rungs:
        cost = promotion_cost(plan, snapshot.settings, policy.prices)
        block = promotion_block(plan, cost, assessment or assess_nothing())
        if block is not None:
            return [block]
    return promotion_decisions(plan, snapshot.settings)


def _search(snapshot: TickSnapshot, policy: Policy, decisions: Sequence[Decision], paused: bool,
            assessment: Assessment | None) -> SearchPlan:
    search = snapshot.settings.search
    if search is None:
        return SearchPlan()
    given_up = [d.attempt_token for d in decisions if d.action == "give_up"]
    curves = {m: _curves(snapshot, m) for m in search_metrics(snapshot.settings, snapshot.trials, snapshot.task_ends,
                                                              paused)}
    return search_decisions(search, snapshot.trials, snapshot.task_ends, given_up, curves, snapshot.sampler,
                            paused, snapshot.settings.search_resources, policy.prices, assessment,
                            snapshot.settings.rungs)


def _curves(snapshot: TickSnapshot, metric: str) -> Curves:
    if metric not in snapshot.curves:
        raise MissingFact(f"the tick needs the curves of metric {metric!r}")
    return snapshot.curves[metric]


def _known_good(snapshot: TickSnapshot, policy: Policy, now: datetime) -> list[Decision]:
    run = snapshot.revision_run
    if run is None:
        return []
    verdict = known_good_verdict(run, now, policy.known_good_after_s)
    if not verdict:
        return []
    return [Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, "revision", KNOWN_GOOD, verdict,
                     {"attempts_ran": run.attempts_ran, "current_since": run.current_since.isoformat(),
                      "known_good_after_s": policy.known_good_after_s}, KnownGood(revision=snapshot.revision))]


def _starts(snapshot: TickSnapshot, policy: Policy, decided: Sequence[Decision]) -> list[Decision]:
    """Section 0, after governance: a campaign's first attempts are what its spec asks, in any mode."""
    if not snapshot.unstarted:
        return []
    if snapshot.starts is None:
        raise MissingFact("the start section needs the unstarted tasks and MaxArraySize")
    ledger = snapshot.exclusion or NO_EXCLUSION
    if any(probing_of(d) for d in decided):  # a retry of this tick is the probe of the nodes on probation
        ledger = ledger.probed()
    return decide_starts(snapshot.starts, policy, ledger)


def _finishing(snapshot: TickSnapshot, views: Sequence[TaskView], ladder: LadderState | None,
               decisions: Sequence[Decision], search_complete: bool) -> frozenset[str] | None:
    given_up = {d.attempt_token for d in decisions if d.action == "give_up"}
    if snapshot.unstarted:  # this tick starts them
        return None
    if snapshot.settings.search is not None:
        complete = search_complete
    else:
        complete = ladder.complete if ladder is not None else snapshot.tasks_started == snapshot.settings.tasks
    if not complete or not all(is_settled(v) or v.latest.token in given_up for v in views):
        return None
    return frozenset(v.latest.token for v in views)


def _tighter(*caps: int | None) -> int | None:
    given = [c for c in caps if c]
    return min(given) if given else None
