"""The policy's tick on the simulated cluster: the one place the simulator calls `decide_tick`,
and the built-in attempt-scaled baseline next to it. Pure.

Which tasks a tick sees. Reconcile builds views only for attempts that still matter (core/slurm/observe:
a task whose only attempt COMPLETED has none) and decides over what changed; at 100,000 tasks a
view of every task at every 5-minute tick would cost more than the rest of the simulation. So a
tick is given:
- the tasks whose latest attempt ended and is not yet answered (the cause rules' input; a task in
  backoff stays in until answered);
- on a tick that decides, the tasks with an attempt ended FAILED within the node rules' window
  (what `repeated` counts across tasks);
- the pending tasks a retry's raise or the campaign's excluded nodes may reach (core/tick/siblings.py),
  only those still asking for less or lacking an excluded node (a second `decide_tick` over the
  same snapshot plus them); the raise is sized by the partition's nodes and the first attempts'
  ends, the one group being the campaign (a simulated task has no parameters of its own). Of the
  first attempts of one array that ask the same, one is shown and stands for the rest: the
  engine carries its resize out on them all (Engine.stand_ins), and the tally counts each;
- every pending and running task when the sections need the whole picture: a packed campaign's
  `max_parallel` (throttles count running and pending per array; an unpacked campaign's are
  counted from the queue) or budget limits (the hold lists pending elements);
- pending tasks waiting longer than `fallback.after` when the spec lists several GPU types;
- every pending task when the policy's right_size may lower them in place (a spec naming a
  `profile:`); its samples are the campaign's own ended attempts, their peak memory the task's
  drawn need. Sizing at submit from other campaigns' history is not simulated (one campaign runs).
The campaign-wide node exclusion (`campaign_exclude_after`) counts the run's NODE_FAIL attempts
by node as the engine ends them (reconcile counts them over its views of every task with one
behind it): on every tick alike, a tick without a view of them excludes the same nodes.
Utilisation and early stopping see no telemetry or metric curves here (the simulator models
neither), so they decide nothing; a progressive campaign's ladder is not simulated.

The node ledger (core/nodes/) is the run's own: it starts empty, its marks are the suspect_node
and clear_node decisions the policy made, scored at each tick's clock, and its exclusions reach
retries and pending elements as the live tick's do. A completed attempt reports one step per
minute of its task's drawn run time: a slow node's attempts make fewer steps per second. The
slow-node rule compares each tick's completions with the last COMPLETIONS_WINDOW completed
attempts, as the live tick reads them (core/nodes/evidence.py)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from campaignctl.core.base.clock import stamp
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.decisions.action_records import ClearNode, GiveUp, NodeSuspect, Resubmit
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.nodes.evidence import COMPLETIONS_WINDOW, Completion
from campaignctl.core.nodes.ledger import (
    NO_EXCLUSION,
    PROBE,
    Exclusion,
    NodeMark,
    exclusion,
    probing_of,
    standings,
)
from campaignctl.core.nodes.node_rules import NodeRules
from campaignctl.core.policy.policy import CAUSE_OF_STATE, Policy
from campaignctl.core.resources import Resources
from campaignctl.core.sim.clusters import move_facts
from campaignctl.core.sim.engine import Decider, Engine
from campaignctl.core.sim.loads import LoadBook
from campaignctl.core.sim.scheduler import Job, Shape
from campaignctl.core.sim.trials import SimSearch
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.tick.decide import exclusion_of, sibling_raises
from campaignctl.core.tick.right_size import ENDED, UsageSample, groups
from campaignctl.core.tick.right_size import RULE as RIGHT_SIZE
from campaignctl.core.tick.siblings import CAMPAIGN, Ends, NodeShape, SiblingFacts
from campaignctl.core.tick.throttle import Loads
from campaignctl.core.tick.tick import TickPlan, decide_tick, needs
from campaignctl.core.tick.tick_facts import TickSnapshot, with_facts
from campaignctl.core.tuning.search import Sampler
from campaignctl.core.usage.cost import UsageGroup

ATTEMPT_SCALED = "attempt-scaled"
ATTEMPT_SCALED_RETRIES = 3  # Snakemake `--retries 3`, Nextflow `maxRetries 3`


def policy_decider(policy: Policy, settings: CampaignSettings, search: SimSearch | None = None,
                   sampler: Sampler | None = None) -> Decider:
    """A tick that decides as `campaignctl reconcile` would, through `decide_tick`; a search's
    with its sampler over `search`'s synthetic objective (core/sim/trials.py)."""

    lowered: set[str] = set()  # attempts right_size lowered in place (it lowers each once)
    pushed: dict[str, object] = {}  # the excluded nodes last pushed to pending tasks, and when
    book: LoadBook | None = None  # what the throttles read, kept as the queue changes
    ledger = SimLedger(policy.nodes)

    def tick(engine: Engine, now: datetime) -> TickPlan:
        nonlocal book
        engine.stand_ins.clear()
        right_sizes = policy.right_size.enabled and policy.right_size.lower and settings.profile is not None
        # max_parallel alone needs no view of every waiting task: the queue counts what the throttles read
        counted = bool(settings.max_parallel) and settings.pack is None
        whole = bool((settings.max_parallel and not counted) or settings.budget.limits() or right_sizes
                     or len(settings.clusters) > 1)
        changed = _changed(engine)
        views = changed + _recently_failed(engine, changed, policy.nodes.window_s) + (
            _active(engine) if whole else _waiting(engine, policy, settings, now))
        nodes = ledger.facts(engine, now)
        loads = None
        if counted and not whole:
            book = book if book is not None and book.queue is engine.queue else LoadBook(engine.queue)
            loads = book.loads_for(engine.tally.running, settings.max_parallel or 0)
        plan = _decide(engine, policy, settings, views, now, lowered, search, sampler, nodes, loads)
        siblings = [] if whole else _siblings(engine, plan, views, policy, pushed, nodes.exclusion, settings.exclude)
        if siblings:
            plan = _decide(engine, policy, settings, views + siblings, now, lowered, search, sampler, nodes, loads)
        if search is not None:
            search.saw(plan.decisions)
        lowered.update(d.attempt_token for d in plan.decisions if d.rule == RIGHT_SIZE and d.mode == "enforce")
        ledger.saw(plan.decisions, now)
        return plan

    return tick


@dataclass(slots=True)
class SimLedger:
    """The run's node ledger, and the completions the slow-node rule reads."""

    rules: NodeRules
    # each node's marks that still count, oldest first: a cleared node's earlier ones and all but
    # its latest probe are dropped as they are made (core/nodes/ledger.py `_standing` reads no more)
    marks: dict[str, list[NodeMark]] = field(default_factory=dict)
    suspected: set[tuple[str, str]] = field(default_factory=set)
    recent: deque[Completion] = field(default_factory=lambda: deque(maxlen=COMPLETIONS_WINDOW))
    last_completed: str | None = None

    def facts(self, engine: Engine, now: datetime) -> NodeFacts:
        if not self.rules.enabled:
            return NodeFacts(NO_EXCLUSION, (), 0, frozenset(), None)
        setup = engine.setup
        partition = setup.cluster.partition(setup.resources.partition)
        fresh = [self._completion(engine, job) for job in engine.completed]
        engine.completed.clear()
        if fresh:
            self.last_completed = max(c.ended_at for c in fresh)
        completions = (*self.recent, *fresh)
        self.recent.extend(fresh)
        found = exclusion(standings([m for ms in self.marks.values() for m in ms], now, self.rules),
                          partition.nodes, self.rules) if self.marks else NO_EXCLUSION
        return NodeFacts(found, completions if fresh else (), len(fresh), frozenset(self.suspected),
                         self.last_completed)

    def _completion(self, engine: Engine, job: Job) -> Completion:
        end = job.end_at or engine.now
        return Completion(job.task, job.token, engine.queue.names[job.node] if job.node is not None else "",
                          stamp(engine.at(end)), end - (job.start or end), engine.setup.truths[job.task].run_s // 60)

    def saw(self, decisions: Sequence[Decision], now: datetime) -> None:
        for d in decisions:
            if d.mode != "enforce" or d.gate:
                continue
            for node in probing_of(d):  # only a node's latest probe counts
                kept = [m for m in self.marks.get(node, ()) if m.kind != PROBE]
                self.marks[node] = [*kept, NodeMark(node, now, PROBE)]
            match d.typed:
                case NodeSuspect(node=node, kind=kind, weight=weight):
                    self.marks.setdefault(node, []).append(NodeMark(node, now, kind, weight))
                    self.suspected.add((d.attempt_token, node))
                case ClearNode(node=node):
                    self.marks.pop(node, None)  # a clean run wipes the slate: no standing until new evidence


@dataclass(frozen=True, slots=True)
class NodeFacts:
    exclusion: Exclusion
    completions: tuple[Completion, ...]
    completed: int
    suspected: frozenset[tuple[str, str]]
    last_completed: str | None


def _decide(engine: Engine, policy: Policy, settings: CampaignSettings, views: list[TaskView],
            now: datetime, lowered: set[str], search: SimSearch | None = None,
            sampler: Sampler | None = None, nodes: NodeFacts | None = None, loads: Loads | None = None) -> TickPlan:
    snapshot = TickSnapshot(
        "paused" if engine.paused else "active", 1, settings, tuple(views), requests=engine.requests, loads=loads,
        node_failures=engine.node_failures,
        pending_since={v.latest.token: engine.at(engine.active[v.latest.token].submit)
                       for v in views if v.latest.state == "PENDING"} if _falls_back(policy, settings) else {},
        usage=_usage(engine) if settings.budget.limits() else (),
        array_throttles=engine.throttles,
        tasks_started=sum(1 for jobs in engine.jobs if jobs) if search else settings.tasks,
        task_ends=search.ends(engine.jobs, engine.settled) if search else {},
        trials=search.trials() if search else (), sampler=sampler,
        completed=nodes.completed if nodes else 0, suspected=nodes.suspected if nodes else frozenset())
    if nodes is not None:
        snapshot = with_facts(snapshot, exclusion=nodes.exclusion, completions=nodes.completions,
                              last_completed=nodes.last_completed or "")
    facts = needs(snapshot, policy, now)
    if facts.queue or facts.metrics:  # squeue says Resources for what waits; the one metric is a search's
        metric = settings.search.metric if search and settings.search else None
        snapshot = with_facts(snapshot, {v.latest.job_id or "": "Resources" for v in views
                                         if v.latest.state == "PENDING"}, engine.free_gpus(),
                              {m: search.curves(engine.jobs) if search and m == metric else {} for m in facts.metrics})
    if facts.right_size:
        snapshot = with_facts(snapshot, samples=_samples(engine, settings), lowered=frozenset(lowered))
    if facts.moves:
        snapshot = with_facts(snapshot, moves=move_facts(engine.queue, settings.clusters, engine.setup.resources,
                                                         engine.now, engine.at))
    if facts.siblings:
        snapshot = with_facts(snapshot, siblings=_sibling_facts(engine))
    return decide_tick(snapshot, policy, now)


def _falls_back(policy: Policy, settings: CampaignSettings) -> bool:
    """GPU-type fallback reads when each pending task was submitted (core/tick/fallback.py)."""
    return bool(policy.fallback.after_s) and len(settings.gpu_types) > 1


def _samples(engine: Engine, settings: CampaignSettings) -> list[UsageSample]:
    """The campaign's ended attempts as right_size reads them from the store: the peak memory
    is the task's drawn need (at most its limit: an OOM stops there), the elapsed time its run."""
    ended = [job for jobs in engine.jobs for job in jobs if job.state in ENDED and job.start is not None]
    group = groups(settings, [engine.view(task) for task in sorted({job.task for job in ended})])
    truths = engine.setup.truths
    return [UsageSample("", group[job.task], job.state, float(min(truths[job.task].mem_mb, job.res.mem_mb)),
                        (job.end_at or engine.now) - (job.start or 0), job.res) for job in ended]


def _changed(engine: Engine) -> list[TaskView]:
    return [engine.view(task) for task in sorted(engine.unanswered)]


def _active(engine: Engine) -> list[TaskView]:
    tasks = sorted({job.task for job in engine.active.values()} - engine.unanswered)
    return [engine.view(task) for task in tasks]


def _waiting(engine: Engine, policy: Policy, settings: CampaignSettings, now: datetime) -> list[TaskView]:
    if not _falls_back(policy, settings):
        return []
    since = engine.now - policy.fallback.after_s
    return [engine.view(job.task) for job in engine.active.values()
            if job.state == "PENDING" and job.submit <= since and job.res.gpu_type != settings.gpu_types[-1]]


def _recently_failed(engine: Engine, changed: list[TaskView], window_s: int) -> list[TaskView]:
    """On a tick that decides, the tasks with an attempt that ended FAILED within the node rules'
    window (not already seen): what `repeated` counts across tasks (core/nodes/evidence.py), as
    reconcile's views hold every task that ever failed."""
    since = engine.now - window_s
    while engine.failed and engine.failed[0][0] < since:
        engine.failed.popleft()
    if not changed or not engine.failed:
        return []
    seen = {v.index for v in changed}
    return [engine.view(task) for task in sorted({t for _, t in engine.failed} - seen)]


def _siblings(engine: Engine, plan: TickPlan, views: list[TaskView], policy: Policy,
              pushed: dict[str, object], ledger: Exclusion = NO_EXCLUSION,
              base: frozenset[str] | None = None) -> list[TaskView]:
    """Pending tasks this plan's raises or the campaign's excluded nodes reach: still asking for
    less than a raise that is made (core/tick/siblings.py), lacking an excluded node, or (with the
    spec's own `base`) leaving out one nothing excludes any longer (decide.kept_out: a retry's own
    failed nodes count here too, the tick keeps them)."""
    triggers = [d for d in plan.decisions if d.action == "resubmit" and d.rule in ("out_of_memory", "timeout")]
    facts = _sibling_facts(engine) if triggers else None
    raises = [r for _, r, _ in sibling_raises(views, triggers, policy, facts)] if facts else []
    excluded = exclusion_of(engine.node_failures.get("", {}), policy) \
        if policy.rule("node_fail").exclude_failed_node else frozenset()
    excluded |= set(ledger.for_array(2))  # pending elements keep a node on probation out (decide.py)
    mem = max((r.mem_mb for r in raises if r.mem_mb), default=0)
    time = max((r.time_min for r in raises if r.time_min), default=0)
    # an excluded node is pushed once to everything pending, then only to arrays submitted since
    fresh = excluded != pushed.get("excluded")
    at = pushed.get("at", 0)
    since = 0 if fresh or not isinstance(at, int) else at
    made = pushed.get("made", 0)  # arrays added before the last tick's push were submitted before `at`
    pushed.update(excluded=excluded, at=engine.now + 1, made=len(engine.queue.added))
    if not (mem or time or excluded or (base is not None and fresh)):
        return []
    seen = {v.index for v in views}
    lacking: dict[str | None, bool] = {}  # an --exclude list → whether it lacks an excluded node

    def lacks(exclude: str | None) -> bool:
        if exclude not in lacking:
            have = set(split_nodes(exclude or ""))
            lacking[exclude] = not excluded <= have or (base is not None and bool(have - base - excluded))
        return lacking[exclude]

    def reached(key: Shape) -> bool:
        return key[3] < mem or key[7] < time or lacks(key[6])

    # an array's pending elements share a few shapes: an array none of whose shapes is reached is passed over
    arrays = engine.queue.waiting() if mem or time else [
        a for a in engine.queue.added[made if since and isinstance(made, int) else 0:] if a.submit >= since]
    alone: list[int] = []
    alike: dict[tuple[str, Shape], list[Job]] = {}
    for array in arrays:
        if not any(reached(k) for k in array.shapes):
            continue
        for job in array.pending.values():
            if job.task < 0 or job.task in seen or not reached(job.key):
                continue
            if job.params or len(engine.jobs[job.task]) > 1:
                alone.append(job.task)
            else:
                alike.setdefault((array.id, job.key), []).append(job)
    # A first attempt's resize depends on its cluster, its request and the raises reaching its
    # array alone (decide.py plans them once, `alike`): one element stands for the others of its
    # array that ask the same, and the engine carries its decision out on them all, as one
    # `scontrol update JobId=<array>_[…]` would. A wave costs a view per array and request.
    engine.stand_ins.update({jobs[0].token: jobs for jobs in alike.values() if len(jobs) > 1})
    return [engine.view(task) for task in sorted([*alone, *(jobs[0].task for jobs in alike.values())])]


def _sibling_facts(engine: Engine) -> SiblingFacts:
    """The partition's nodes, and how first attempts ended (a simulated task has no parameters
    of its own, so the campaign is the one group): started counts the running ones too."""
    setup = engine.setup
    partition = setup.cluster.partition(setup.resources.partition)
    shapes = {NodeShape(n.cpus, n.mem_mb, n.gpus) for n in setup.cluster.nodes if n.name in partition.nodes}
    ends = engine.first_ends
    started = engine.first_started
    return SiblingFacts(tuple(sorted(shapes, key=lambda n: (n.cpus, n.mem_mb, n.gpus))),
                        {CAMPAIGN: Ends(started, ends.get("OUT_OF_MEMORY", 0), ends.get("TIMEOUT", 0))})


def _usage(engine: Engine) -> tuple[UsageGroup, ...]:
    """The spend's GROUP BY (phase, resources), as the store returns it for the budget."""
    groups: dict[tuple[str, Resources], list[int]] = {}
    for jobs in engine.jobs:
        for job in jobs:
            phase = {"PENDING": "pending", "RUNNING": "running"}.get(job.state, "ended")
            elapsed = (job.end_at or engine.now) - job.start if job.start is not None else 0
            elapsed = int(elapsed * job.share)  # a packed task's share of its pack's allocation
            group = groups.setdefault((phase, job.res), [0, 0])
            group[0] += 1
            group[1] += elapsed
    return tuple(UsageGroup(phase, res, "", n, s) for (phase, res), (n, s) in groups.items())


def attempt_scaled_decider(retries: int = ATTEMPT_SCALED_RETRIES) -> Decider:
    """The baseline many workflow users configure: every failure retried up to `retries` times
    with memory and time × the attempt number (Snakemake `mem_mb=lambda wc, attempt: base *
    attempt` with `--retries`; Nextflow `memory { 2.GB * task.attempt }`, `maxRetries`)."""

    def tick(engine: Engine, now: datetime) -> TickPlan:
        engine.stand_ins.clear()
        decisions = [_scaled(engine.view(task), engine.jobs[task][0].res, retries)
                     for task in sorted(engine.unanswered)]
        return TickPlan(tuple(decisions), (), (), False, False, None, None, None, None, None)

    return tick


def _scaled(view: TaskView, base: Resources, retries: int) -> Decision:
    latest = view.latest
    cause = latest.cause or CAUSE_OF_STATE.get(latest.state, "failed")
    if latest.number > retries:
        return Decision(view.index, latest.token, ATTEMPT_SCALED, "give_up",
                        f"{cause} on attempt {latest.number}: {retries} retries used.", {"cause": cause}, GiveUp())
    n = latest.number + 1
    res = replace(latest.resources, mem_mb=base.mem_mb * n, time_min=base.time_min * n)
    return Decision(view.index, latest.token, ATTEMPT_SCALED, "resubmit",
                    f"{cause} on attempt {latest.number}: attempt {n} with memory and time × {n}.",
                    {"cause": cause}, Resubmit(retry=latest.number), res)
