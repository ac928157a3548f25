"""The discrete-event loop: tasks submitted as arrays, the queue's passes, attempts that start,
end as their truth and hazards say, node failures and preemptions, and a policy tick every
`tick_s` whose plan is carried out on the simulated cluster. Core only, no I/O.

Simulated time is whole seconds from the start; the policy sees it as `EPOCH + t` (UTC)."""

from __future__ import annotations

import heapq
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

from campaignctl.core.decisions.action_records import Ask, Cancel, Resubmit, Throttle
from campaignctl.core.decisions.answers import ANSWERS
from campaignctl.core.decisions.decision import Decision, Replacement, TaskView
from campaignctl.core.decisions.requests import Requests
from campaignctl.core.model.params import SCALAR_TYPES
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.resources import Resources
from campaignctl.core.sim.clusters import BACKGROUND, Item, add_background, placed, predictions
from campaignctl.core.sim.packs import PACK, all_ended, idle_hours, make_packs
from campaignctl.core.sim.scheduler import Array, Job, Queue
from campaignctl.core.sim.setup import Setup, attempt_view
from campaignctl.core.sim.tally import Tally
from campaignctl.core.sim.workload import fate, hazards
from campaignctl.core.slurm import job_ref
from campaignctl.core.tick.tick import TickPlan

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
MAX_ARRAY = 1000  # MaxArraySize 1001 caps the index: arrays of at most 1000 elements (core/slurm/plan.py)
REQUEUE_DELAY_S = 120  # a requeued job waits cred_expire (120 s) before it may start (lab NOTES, pitfall 4)
IDLE_TICKS = 12  # ticks with nothing happening, nothing running: the rest can never run (held, excluded)
BACKGROUND_S = 3600  # how long another user's job on the busy cluster holds its node
SCHED_S = 30  # a scheduling pass at most this often: slurm.conf bf_interval's default (backfill's cycle)
END, NODE_DOWN, NODE_UP, PREEMPTOR, SUBMIT, PASS, TICK = range(7)  # same second: ends first, the tick last


Decider = Callable[["Engine", datetime], TickPlan]


@dataclass(slots=True)
class Engine:
    setup: Setup
    decider: Decider
    progress: Callable[[int, int], None] | None = None
    queue: Queue = field(init=False)
    now: int = 0
    tally: Tally = field(init=False)
    jobs: list[list[Job]] = field(init=False)  # per task, attempts oldest first
    active: dict[str, Job] = field(default_factory=dict)  # campaign jobs pending or running, by token
    unanswered: set[int] = field(default_factory=set)  # tasks whose latest attempt ended unanswered
    decided: set[str] = field(default_factory=set)
    settled: dict[int, str] = field(default_factory=dict)  # task → completed | given_up | stopped
    requests: Requests = field(default_factory=Requests)
    throttles: dict[str, int | None] = field(default_factory=dict)
    paused: bool = False
    first_ends: dict[str, int] = field(default_factory=dict)  # how first attempts ended: state → count
    first_started: int = 0  # first attempts that started (running or ended)
    # attempts ended NODE_FAIL, by cluster ('' : the first, unqualified) and node: the campaign-wide
    # exclusion counts them (core/tick/decide.py count_node_failures, as reconcile counts its views)
    node_failures: dict[str, Counter[str]] = field(default_factory=dict)
    failed: deque[tuple[int, int]] = field(default_factory=deque)  # (when, task) of each attempt ended FAILED
    completed: list[Job] = field(default_factory=list)  # attempts completed since the driver last took them
    # a pending element's token → the elements of its array that ask the same, itself first: the
    # decider gave the policy the first alone this tick (core/sim/driver.py `_siblings`)
    stand_ins: dict[str, list[Job]] = field(default_factory=dict)
    _views: dict[int, TaskView] = field(default_factory=dict)
    _heap: list[tuple[int, int, int, object, int]] = field(default_factory=list)
    _seq: int = 0
    _arrays: int = 0
    _dirty: bool = False
    _pass_due: bool = False
    _to: dict[int, str] = field(default_factory=dict)  # task → the cluster its next attempt goes to (a move)

    def __post_init__(self) -> None:
        self.queue = Queue(self.setup.cluster)
        self.tally = Tally(len(self.setup.truths), track=self.setup.track)
        self.jobs = [[] for _ in self.setup.truths]

    # --- the loop ------------------------------------------------------------------------------

    def run(self) -> Tally:
        by_time: dict[int, list[int]] = {}
        for task, truth in enumerate(self.setup.truths):
            by_time.setdefault(truth.submit_s, []).append(task)
        if self.setup.busy_jobs:
            self._background()
        for t, tasks in by_time.items() if self.setup.search is None else ():
            self._push(t, SUBMIT, tasks)
        self._push(0 if self.setup.search else self.setup.tick_s, TICK, None)  # submit's tick asks a search's first
        idle = 0
        while self._heap and len(self.settled) < len(self.jobs) and self.now <= self.setup.horizon_s:
            t, kind, _, ref, starts = heapq.heappop(self._heap)
            self.now = t
            if kind == TICK:
                changed = self._tick() or self._dirty
                if self.queue.arrays:
                    self._schedule()
                # other users' jobs running (the busy cluster's queue): the campaign waits, it is not stuck
                idle = 0 if changed or self.tally.running or any(a.running for a in self.queue.arrays) else idle + 1
                if idle >= IDLE_TICKS:
                    break
                self._dirty = False
                self._push(t + self.setup.tick_s, TICK, None)
                if self.progress:
                    self.progress(len(self.settled), len(self.jobs))
                continue
            if kind == PASS:
                self._pass_due = False
                self._schedule()
                continue
            self._dirty = True
            self._event(kind, ref, starts)
            if not self._pass_due:
                self._pass_due = True
                self._push(-(-t // SCHED_S) * SCHED_S, PASS, None)
        if self.setup.search is not None:  # the tick that sees the last trial end tells it
            self._tick()
        self.tally.finish(self.settled, self.jobs, self.now)
        if self.progress:
            self.progress(len(self.settled), len(self.jobs))
        return self.tally

    def _push(self, t: int, kind: int, ref: object, starts: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, ref, starts))

    def _event(self, kind: int, ref: object, starts: int) -> None:
        if isinstance(ref, Job):
            if kind == END and ref.state == "RUNNING" and ref.starts == starts:
                self._stop(ref, ref.fate)
            elif kind == PREEMPTOR:
                self._preemptor(ref, starts)
        elif isinstance(ref, int):
            if kind == NODE_DOWN:
                self._node_down(ref)
            else:
                self.queue.up[ref] = True
        elif isinstance(ref, list) and self.setup.pack:
            self._submit_packed(ref, self.setup.pack)
        elif isinstance(ref, list):
            self._submit([(task, 1, self._first_resources(task), {}) for task in ref], self.setup.max_parallel)

    def _schedule(self) -> None:
        self.queue.schedule(self.now, self._start, self._preempted)

    # --- submission and resources -----------------------------------------------------------------

    def _first_resources(self, task: int) -> Resources:
        request = self.setup.truths[task].request
        if request is None:
            return self.setup.resources
        gpus, cpus, mem, time = request
        return replace(self.setup.resources, gpus=gpus, cpus_per_task=cpus, mem_mb=mem, time_min=time)

    def _array(self, elements: int, throttle: int | None, cluster: str = "") -> Array:
        partition = cluster or self.setup.resources.partition or self.setup.cluster.partitions[0].name
        self._arrays += 1
        array = Array(str(self._arrays), self.queue.tiers[partition], self.now, partition,
                      min(throttle, elements) if throttle else None)
        self.throttles[array.id] = array.throttle
        return array

    def _submit_packed(self, tasks: list[int], shape: PackShape) -> None:
        per_array = MAX_ARRAY * shape.per_element
        for lo in range(0, len(tasks), per_array):
            chunk = tasks[lo:lo + per_array]
            array = self._array(-(-len(chunk) // shape.per_element), self.setup.max_parallel)
            for host in make_packs(chunk, self._first_resources(chunk[0]), shape, array, self.now):
                for member in host.members or ():
                    self.jobs[member.task].append(member)
                    self.active[member.token] = member
                    self._views.pop(member.task, None)
                array.add(host)
            self.queue.add_array(array)
            self.tally.pending += len(chunk)

    def _submit(self, items: list[Item], throttle: int | None) -> None:
        """sbatch: one array per MAX_ARRAY elements (`--array=0-(n-1)%throttle`); with several
        clusters, each array where placement sends it (core/sim/clusters.py)."""
        if self.setup.clusters:
            for cluster, group in self._placed(items).items():
                self._submit_to(group, throttle, cluster)
        else:
            self._submit_to(items, throttle, "")

    def _submit_to(self, items: list[Item], throttle: int | None, cluster: str) -> None:
        prefix = f"{cluster}:" if cluster and cluster != self.setup.clusters[0] else ""  # core/slurm/job_ref.py
        for lo in range(0, len(items), MAX_ARRAY):
            chunk = items[lo:lo + MAX_ARRAY]
            array = self._array(len(chunk), throttle, cluster)
            for index, (task, number, res, params) in enumerate(chunk):
                job = Job(f"{prefix}{array.id}_{index}", array, task, number, f"t{task}a{number}", res, self.now)
                job.params = params
                job.params_changed = bool(params)
                job.held = self.paused
                array.add(job)
                self.jobs[task].append(job)
                self.active[job.token] = job
                self._views.pop(task, None)
            self.queue.add_array(array)
            self.tally.pending += len(chunk)

    # --- attempts -------------------------------------------------------------------------------

    def _start(self, job: Job, node: int) -> None:
        self.queue.allocate(job, node)
        self._begin(job, node, job)
        members = job.members or []
        for member in members[:job.at_once] if job.at_once else members:  # a pack: its tasks start with it
            self._begin(member, node, job)

    def _begin(self, job: Job, node: int, element: Job) -> None:
        """`job` starts on `node` in `element` (itself, or its pack's host)."""
        job.state, job.start, job.node = "RUNNING", self.now, node
        job.starts += 1
        self.first_started += job.task >= 0 and job.attempt == 1 and job.starts == 1
        self.tally.started(job)
        self._views.pop(job.task, None)
        if job.task == PACK:
            return
        if job.task < 0:  # another user's job (a preemptor, or the busy cluster's queue): it holds the node
            held_s = BACKGROUND_S if job.task == BACKGROUND else int(self.setup.workload.preemptor_min * 60)
            self._push(self.now + held_s, END, job, job.starts)
            return
        lemon = node in self.setup.lemons
        hz = hazards(self.setup.workload, self.setup.seed, job.task, job.attempt, job.starts,
                     node in self.setup.flaky, lemon)
        truth = self.setup.truths[job.task]
        if lemon and self.setup.workload.lemon_slow > 1:
            truth = replace(truth, run_s=int(truth.run_s * self.setup.workload.lemon_slow))
        end, state, exit_code, cause = fate(truth, job.res, job.attempt, job.params_changed,
                                            self.jobs[job.task][0].res.gpu_type, hz)
        job.fate, job.exit, job.cause = state, exit_code, cause
        self._push(self.now + end, END, job, job.starts)
        if hz.node_fail_at is not None and int(hz.node_fail_at * end) < end:
            self._push(self.now + int(hz.node_fail_at * end), NODE_DOWN, node)
        if hz.preempt_at is not None and int(hz.preempt_at * end) < end:
            self._push(self.now + int(hz.preempt_at * end), PREEMPTOR, element, element.starts)

    def _stop(self, job: Job, state: str) -> None:
        """The job leaves its node in `state` (the attempt's end as sacct would record it). A
        pack's host ends as its members do: a node failure or preemption ends them all."""
        if job.members is not None:
            job.state = "ENDING"  # no member starts now
            for member in job.members:
                if member.state in ("RUNNING", "PENDING"):  # a plain-process pack's waiting ones too
                    self._stop(member, state)
            return
        if job.host is None:
            self.queue.release(job)
        self.tally.stopped(job, self.now, state)
        if job.node in self.setup.lemons and job.start is not None and job.task >= 0:
            hours = (self.now - job.start) / 3600 * job.share * job.res.gpus
            slow = self.setup.workload.lemon_slow
            self.tally.lemon_gpu_hours += hours if state != "COMPLETED" else hours * (1 - 1 / max(slow, 1.0))
        if job.start is None:
            self.tally.pending -= 1  # a plain-process pack's task its host's end caught waiting
        job.state, job.end_at = state, self.now
        if job.host is not None and job.host.at_once and job.host.state == "RUNNING":
            waiting = next((m for m in job.host.members or () if m.state == "PENDING"), None)
            if waiting is not None:  # the next of a plain-process pack takes its place
                self._begin(waiting, job.host.node if job.host.node is not None else 0, job.host)
        if job.host is not None and all_ended(job.host):  # the pack's last task: its element ends
            self.queue.release(job.host)
            self.tally.idle(*idle_hours(job.host, self.now))
            job.host.state, job.host.end_at = "COMPLETED", self.now
        if state != job.fate:  # a node failure, a preemption or a cancel ended it first
            job.exit, job.cause = 0, None
        if job.task < 0:
            return
        self.active.pop(job.token, None)
        self._views.pop(job.task, None)
        if job.attempt == 1:
            self.first_ends[state] = self.first_ends.get(state, 0) + 1
        if state == "NODE_FAIL" and job.node is not None:
            self.node_failures.setdefault(job_ref.cluster_of(job.jid or ""), Counter())[self.queue.names[job.node]] += 1
        elif state == "FAILED":
            self.failed.append((self.now, job.task))
        if state == "COMPLETED":
            self.completed.append(job)
            self.settled[job.task] = "completed"
            self.tally.settle(self.now)
        else:
            self.unanswered.add(job.task)

    def _node_down(self, node: int) -> None:
        if not self.queue.up[node]:
            return
        self.queue.up[node] = False
        for job in list(self.queue.on_node[node].values()):
            self._stop(job, "NODE_FAIL")
        self._push(self.now + int(self.setup.workload.node_down * 60), NODE_UP, node)

    def _preemptor(self, victim: Job, starts: int) -> None:
        """A higher-tier job arrives wanting the victim's node (pinned, `-w`), as big as the victim."""
        if victim.state != "RUNNING" or victim.starts != starts or victim.node is None:
            return
        top = self.setup.cluster.top_partition()
        self._arrays += 1
        array = Array(f"{self._arrays}", top.priority_tier, self.now, top.name, None)
        job = Job(f"{array.id}_0", array, -1, 1, f"preemptor{self._arrays}", replace(victim.res, exclude=None),
                  self.now, pinned=victim.node)
        array.add(job)
        self.queue.add_array(array)

    def _preempted(self, victim: Job) -> None:
        """PreemptMode=REQUEUE: requeued if the job allows it, else it ends PREEMPTED."""
        if not self.setup.requeue or victim.task < 0:
            self._stop(victim, "PREEMPTED")
            return
        self.queue.release(victim)
        self.tally.stopped(victim, self.now, "PREEMPTED")
        victim.state, victim.begin = "PENDING", self.now + REQUEUE_DELAY_S
        self.queue.requeue(victim)
        self._views.pop(victim.task, None)

    # --- the policy's tick ----------------------------------------------------------------------

    def _tick(self) -> bool:
        plan = self.decider(self, self.at(self.now))
        self.tally.tick(plan, self.stand_ins)
        return self._apply(plan)

    def at(self, t: int) -> datetime:
        return EPOCH + timedelta(seconds=t)

    def free_gpus(self) -> dict[str, int]:
        """sinfo's view for GPU-type fallback: the most free GPUs of each type on one up node."""
        out: dict[str, int] = {}
        q = self.queue
        for i, node in enumerate(self.setup.cluster.nodes):
            if node.gpu_type and q.up[i]:
                out[node.gpu_type] = max(out.get(node.gpu_type, 0), q.free_gpus[i])
        return out

    def view(self, task: int) -> TaskView:
        """The task as the policy sees it (cached until one of its attempts changes)."""
        cached = self._views.get(task)
        if cached is None:
            cached = TaskView(task, tuple(attempt_view(j, self.now, self.at, self.queue.names, self.decided)
                                          for j in self.jobs[task]))
            self._views[task] = cached
        return cached

    @property
    def arrays_submitted(self) -> int:
        return self._arrays

    def _apply(self, plan: TickPlan) -> bool:
        retries: list[Item] = []
        acted = False
        for d in plan.decisions:
            if d.mode != "enforce" or d.gate:
                continue
            acted = self._carry_out(d, retries) or acted
        if plan.paused and not self.paused:
            self.paused = acted = True
            for job in self.active.values():
                if job.state == "PENDING":
                    job.held = True
                    if job.host is not None:  # a pack is held as one element
                        job.host.held = True
        if retries:
            self._submit(retries, plan.retry_parallel)
        return acted

    def _carry_out(self, d: Decision, retries: list[Item]) -> bool:
        task = d.task_index
        if isinstance(asked := d.typed, Ask) and self.setup.search:  # a trial's first attempt
            retries.append((task, 1, d.resources or self.setup.resources, {**self.setup.search.fixed, **{
                k: v for k, v in asked.params.items() if isinstance(v, SCALAR_TYPES)}}))
            return True
        if d.action in ANSWERS:
            self.decided.add(d.attempt_token)
            self.unanswered.discard(task)
            self._views.pop(task, None)
            if d.action == "give_up":
                self.settled[task] = "given_up"
                self.tally.settle(self.now)
            else:
                latest = self.jobs[task][-1]
                p = d.typed
                chosen = p.task_params if isinstance(p, Resubmit) else None
                carried = dict(latest.params) if chosen is None else {
                    k: v for k, v in chosen.items() if isinstance(v, SCALAR_TYPES)}
                if isinstance(p, Resubmit) and p.cluster:  # a move's replacement
                    self._to[task] = p.cluster
                retries.append((task, latest.attempt + 1, d.resources or latest.res, carried))
            return True
        job = self.active.get(d.attempt_token)
        if d.action == "resize_pending" and job is not None and job.state == "PENDING" and d.resources:
            alike = [j for j in self.stand_ins.get(d.attempt_token, (job,)) if j.state == "PENDING"]
            self.queue.resize(job.array, alike, d.resources)
            for j in alike:
                self._views.pop(j.task, None)  # its view showed the old request
        elif d.action == "cancel" and job is not None:
            self._cancel(job, d)
        elif d.action == "stop" and job is not None and job.state == "RUNNING":
            self._stop(job, "CANCELLED")
            self.unanswered.discard(task)
            self.settled[task] = "stopped"
            self.tally.settle(self.now)
        elif isinstance(p := d.typed, Throttle):
            self._throttle(p.array_job_id, p.throttle)
        else:
            return False
        return True

    def _cancel(self, job: Job, d: Decision) -> None:
        """scancel of a pending job to move it (GPU-type fallback): the next tick resubmits it."""
        if job.state != "PENDING":
            return
        self.queue.withdraw(job)
        self.tally.pending -= 1
        job.state, job.end_at = "CANCELLED", self.now
        self.active.pop(job.token, None)
        self.requests.cancel_requested.add(job.token)
        p = d.typed
        moves = self.requests.cluster_moves if isinstance(p, Cancel) and p.to_cluster else self.requests.moves
        moves[job.task] += 1
        if isinstance(p, Cancel) and p.replacement is not None:
            self.requests.replacements[job.token] = Replacement(d.rule, p.replacement, d.reason, p.only_if,
                                                                cluster=p.to_cluster)
        self.unanswered.add(job.task)
        self._views.pop(job.task, None)

    # --- several clusters (core/sim/clusters.py) ---------------------------------------------------

    def _background(self) -> None:
        array = self._array(self.setup.busy_jobs, None, self.setup.clusters[0])
        add_background(array, self.setup.busy_jobs, replace(self.setup.resources, time_min=BACKGROUND_S // 60))
        self.queue.add_array(array)

    def _placed(self, items: list[Item]) -> dict[str, list[Item]]:
        return placed(items, self.setup.clusters, self.setup.placement, self._to,
                      lambda task: self.jobs[task][-1].array.partition if self.jobs[task] else None,
                      lambda: predictions(self.queue, self.setup.clusters, self.now, self.setup.resources, self.at))

    def _throttle(self, array_id: str, value: int | None) -> None:
        array = self.queue.by_id.get(array_id)
        if array is not None:
            array.throttle = value if value is not None and value > 0 else None
            self.throttles[array_id] = array.throttle
            self.queue.touch(array)
