"""Slurm's queue, simulated: priority order, EASY backfill on time limits, array throttles, holds,
and partition-priority preemption. Mutable state, no I/O. Pure in the house's sense: core only.

What it follows from Slurm 22.05 (slurm.conf(5), sched/backfill):
- order: partition PriorityTier first, then submit time (age), then job id; elements of one array
  are in index order;
- the first job that cannot start now gets a reservation: the earliest time, by the running jobs'
  time limits (not their real ends, which Slurm cannot know), at which one node can hold it;
  a later job may start now only if it fits now and either ends by its time limit before that
  reservation or runs on another node (EASY backfill, per node);
- at most `bf_max_job_test` (default 500) jobs are tried per pass;
- `%N` (ArrayTaskThrottle) caps an array's running elements; held jobs are passed over;
- `PreemptType=preempt/partition_prio`: a job that does not fit may take a node from jobs of
  lower-tier partitions (newest first); with PreemptMode=REQUEUE a job submitted `--no-requeue`
  ends PREEMPTED, one that allows requeue goes back to pending (the engine decides which)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from campaignctl.core.decisions.decision import AttemptView
from campaignctl.core.model.params import Scalar
from campaignctl.core.resources import Resources
from campaignctl.core.sim.cluster import Cluster
from campaignctl.core.tick.decide import split_nodes

BF_MAX_JOB_TEST = 500  # slurm.conf SchedulerParameters bf_max_job_test default


class Job:
    """One simulated Slurm job (array element). Mutable: the queue moves it along."""

    __slots__ = (
        "array",
        "at_once",
        "attempt",
        "begin",
        "cause",
        "end_at",
        "exit",
        "fate",
        "held",
        "host",
        "jid",
        "key",
        "members",
        "node",
        "params",
        "params_changed",
        "pinned",
        "res",
        "share",
        "start",
        "starts",
        "state",
        "submit",
        "task",
        "tier",
        "token",
        "viewed",
    )

    def __init__(self, jid: str, array: Array, task: int, attempt: int, token: str, res: Resources,
                 submit: int, pinned: int | None = None) -> None:
        self.jid, self.array, self.task, self.attempt, self.token = jid, array, task, attempt, token
        self.res, self.tier, self.submit, self.begin = res, array.tier, submit, submit
        self.start: int | None = None
        self.state = "PENDING"
        self.node: int | None = None
        self.held = False
        self.pinned = pinned  # a node index it must run on (`-w`)
        self.starts = 0  # how often it started (a requeued job starts again)
        self.end_at: int | None = None
        self.fate = "COMPLETED"  # how this start will end unless a node failure or preemption ends it first
        self.exit: int | None = None
        self.cause: str | None = None  # named by the program's output (gpu_out_of_memory)
        self.params: dict[str, Scalar] = {}
        self.params_changed = False
        self.key: Shape = (None, "", 0, 0, 0, None, None, 0)  # its shape while pending (set by Array.add)
        # a pack (core/sim/packs.py): the element the queue runs holds `members`, one per task,
        # each with its `host` and its `share` of the host's allocation
        self.members: list[Job] | None = None
        self.host: Job | None = None
        self.share = 1.0
        self.at_once = 0  # a pack of plain processes: its members run this many at a time (0: all at once)
        # once ended: what its view was made of (starts, state, end, decided) and the view (core/sim/setup.py)
        self.viewed: tuple[tuple[int, str, int | None, bool], AttemptView] | None = None


class Array:
    """One sbatch --array: its pending elements in index order and its throttle."""

    __slots__ = ("id", "need", "partition", "pending", "running", "shapes", "submit", "throttle", "tier")

    def __init__(self, array_id: str, tier: int, submit: int, partition: str, throttle: int | None) -> None:
        self.id, self.tier, self.submit, self.partition = array_id, tier, submit, partition
        self.pending: dict[str, Job] = {}
        self.shapes: dict[Shape, int] = {}  # pending elements by shape
        self.running = 0
        self.throttle = throttle
        self.need = (1 << 30, 1 << 60, 1 << 30)  # at least this much (CPUs, MB, GPUs) for any element

    def add(self, job: Job) -> None:
        self.pending[job.jid] = job
        r = job.res
        job.key = key = shape(job)
        self.need = (min(self.need[0], r.cpus_per_task), min(self.need[1], r.mem_mb), min(self.need[2], r.gpus))
        self.shapes[key] = self.shapes.get(key, 0) + 1

    def remove(self, job: Job) -> None:
        del self.pending[job.jid]
        key = job.key
        self.shapes[key] -= 1
        if not self.shapes[key]:
            del self.shapes[key]

    def resize(self, jobs: Sequence[Job], res: Resources) -> None:
        """Pending elements of this array, to `res` (one `scontrol update JobId=<array>_[…]`).
        Each goes behind the array's other pending elements (Slurm splits an updated element off
        the array's meta record into a job record of its own, with a job id of its own)."""
        shapes, pending = self.shapes, self.pending
        for job in jobs:
            shapes[job.key] -= 1
            if not shapes[job.key]:
                del shapes[job.key]
            del pending[job.jid]
            pending[job.jid] = job
            job.res = res
            job.key = key = shape(job)
            shapes[key] = shapes.get(key, 0) + 1
        need = self.need
        self.need = (min(need[0], res.cpus_per_task), min(need[1], res.mem_mb), min(need[2], res.gpus))


# pinned node, partition, cpus, mem_mb, gpus, gpu_type, exclude, time_min
Shape = tuple[int | None, str, int, int, int, str | None, str | None, int]


def shape(job: Job) -> Shape:
    """What decides where a job fits and whether it may backfill: its nodes (pinned, its partition's),
    its request and time limit."""
    r = job.res
    return (job.pinned, job.array.partition, r.cpus_per_task, r.mem_mb, r.gpus, r.gpu_type, r.exclude, r.time_min)


@dataclass(frozen=True, slots=True)
class Reservation:
    node: int
    at: int  # seconds: when the blocked job can start there, by time limits


def _blocked(array: Array, nofit: set[tuple[object, ...]], late: set[tuple[object, ...]], passed: set[Shape]) -> bool:
    """Whether every shape of the array's pending elements is passed over for the rest of the pass
    (`passed` keeps the shapes found so: a pass asks this of ~100 retry arrays on a busy cluster)."""
    for key in array.shapes:
        if key not in passed:
            if key[:-1] in nofit or key in late:
                passed.add(key)
            else:
                return False
    return True


class Queue:
    """Free resources per node, the arrays in priority order, and one scheduling pass."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.names = [n.name for n in cluster.nodes]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.free_cpus = [n.cpus for n in cluster.nodes]
        self.free_mem = [n.mem_mb for n in cluster.nodes]
        self.free_gpus = [n.gpus for n in cluster.nodes]
        self.up = [True] * len(cluster.nodes)
        self.on_node: list[dict[str, Job]] = [{} for _ in cluster.nodes]
        self.part_nodes = {p.name: [self.index[n] for n in p.nodes] for p in cluster.partitions}
        self.tiers = {p.name: p.priority_tier for p in cluster.partitions}
        self.lowest_tier = min(self.tiers.values())  # nothing to preempt below it
        self.arrays: list[Array] = []
        self.by_id: dict[str, Array] = {}  # the arrays listed, by id
        self.added: list[Array] = []  # every array ever added, in the order first added
        self._ever: set[str] = set()  # the ids in `added`
        self._head = 0  # arrays before this index have nothing pending (a pass starts there)
        self._live = 64  # arrays kept before the emptied ones are dropped from the list
        # the least any pending job of the lowest tier asks for (a lower bound, what a pass may stop
        # at): it falls with a new array or a request lowered in place (`resize`); recomputed when
        # arrays are dropped. A higher tier's pending job may preempt its way in: no floor then.
        self._floor_cached: tuple[int, int, int] = (1 << 60, 1 << 60, 1 << 60)
        self._higher: list[Array] = []  # arrays of a higher tier that may still pend
        self._excluded: dict[str, frozenset[int]] = {}
        # the arrays whose pending or running elements changed, for whoever asked (core/sim/loads.py)
        self.touched: set[Array] | None = None

    def add_array(self, array: Array) -> None:
        """Place an array by priority (tier, then age); a new one is the youngest of its tier."""
        # the list runs from the highest tier down: after every array of its tier or a higher one
        at = bisect_right(self.arrays, -array.tier, key=lambda a: -a.tier)
        self.arrays.insert(at, array)
        self._head = min(self._head, at)
        self.by_id[array.id] = array
        self.touch(array)
        if array.id not in self._ever:  # a requeue adds a dropped array again
            self._ever.add(array.id)
            self.added.append(array)
        if array.tier > self.lowest_tier:
            self._higher.append(array)
        else:
            f, n = self._floor_cached, array.need
            self._floor_cached = (min(f[0], n[0]), min(f[1], n[1]), min(f[2], n[2]))

    def waiting(self) -> list[Array]:
        """The arrays listed from the first that has pending work, in priority order."""
        return self.arrays[self._head:]

    def requeue(self, job: Job) -> None:
        """A running job back to pending in its array (PreemptMode=REQUEUE): listed again if its
        array was dropped, as the youngest of its tier."""
        array = job.array
        array.add(job)
        if array.id not in self.by_id:
            self.add_array(array)
        else:
            self._head = 0  # its array may lie before the first with pending work
            self.touch(array)

    def withdraw(self, job: Job) -> None:
        """A pending job leaves its array (scancel)."""
        job.array.remove(job)
        self.touch(job.array)

    def touch(self, array: Array) -> None:
        """Its elements or its throttle changed."""
        if self.touched is not None:
            self.touched.add(array)

    def resize(self, array: Array, jobs: Sequence[Job], res: Resources) -> None:
        """`scontrol update` of pending elements: a request lowered in place (right_size) lowers
        the floor a pass reads, or the pass would stop before the element that now fits."""
        array.resize(jobs, res)
        self.touch(array)
        f, n = self._floor_cached, array.need
        self._floor_cached = (min(f[0], n[0]), min(f[1], n[1]), min(f[2], n[2]))

    def fits(self, job: Job, i: int) -> bool:
        r = job.res
        return (self.up[i] and self.free_cpus[i] >= r.cpus_per_task and self.free_mem[i] >= r.mem_mb
                and self.free_gpus[i] >= r.gpus and (not r.gpus or self._gpu_type_ok(r, i)))

    def _gpu_type_ok(self, r: Resources, i: int) -> bool:
        return r.gpu_type is None or self.cluster.nodes[i].gpu_type == r.gpu_type

    def candidates(self, job: Job) -> list[int]:
        """Nodes the job may run on: its partition's, or its pinned one, minus --exclude."""
        if job.pinned is not None:
            return [job.pinned]
        nodes = self.part_nodes[job.array.partition]
        exclude = job.res.exclude
        if not exclude:
            return nodes
        if exclude not in self._excluded:
            self._excluded[exclude] = frozenset(self.index[n] for n in split_nodes(exclude) if n in self.index)
        skip = self._excluded[exclude]
        return [i for i in nodes if i not in skip]

    def allocate(self, job: Job, i: int) -> None:
        r = job.res
        self.free_cpus[i] -= r.cpus_per_task
        self.free_mem[i] -= r.mem_mb
        self.free_gpus[i] -= r.gpus
        self.on_node[i][job.jid] = job
        job.node = i
        job.array.running += 1
        self.touch(job.array)

    def release(self, job: Job) -> None:
        i = job.node
        assert i is not None
        r = job.res
        self.free_cpus[i] += r.cpus_per_task
        self.free_mem[i] += r.mem_mb
        self.free_gpus[i] += r.gpus
        del self.on_node[i][job.jid]
        job.array.running -= 1
        self.touch(job.array)

    def schedule(self, now: int, start: Callable[[Job, int], None],
                 preempt: Callable[[Job], None]) -> None:
        """One pass: start what may start now (`start(job, node)`, which must allocate it),
        preempting where a higher tier needs the node (`preempt(victim)` must release it)."""
        tested = 0
        nofit: set[tuple[object, ...]] = set()  # shapes no node can take now
        late: set[tuple[object, ...]] = set()  # shapes (with time limits) that would delay the reservation
        passed: set[Shape] = set()  # shapes found in either: both only grow during a pass
        reservation: Reservation | None = None
        blocked: Job | None = None  # the first job that could not start: its reservation is made when needed
        if len(self.arrays) > 2 * self._live:
            self.arrays = [a for a in self.arrays if a.pending]
            self.by_id = {a.id: a for a in self.arrays}
            self._head = 0
            self._live = max(len(self.arrays), 64)
            self._floor_cached = self._floor()
        room, up_room = self._rooms()
        if self._higher:
            self._higher = [a for a in self._higher if a.pending]
        floor = None if self._higher else self._floor_cached
        arrays, head = self.arrays, self._head
        while head < len(arrays) and not arrays[head].pending:
            head += 1
        self._head = head
        for array in self.waiting():  # a copy: a start may add an array
            if floor is not None and (floor[0] > up_room[0] or floor[1] > up_room[1] or floor[2] > up_room[2]):
                return  # no node that is up has room for the smallest request pending: nothing can start
            if not array.pending or (array.throttle and array.running >= array.throttle):
                continue
            need = array.need
            short = array.tier <= self.lowest_tier and (need[0] > room[0] or need[1] > room[1] or need[2] > room[2])
            if short or _blocked(array, nofit, late, passed):  # (a higher tier may preempt its way in)
                # nothing of it can start now: Slurm would try them all
                tested += len(array.pending)
                if tested > BF_MAX_JOB_TEST:
                    return
                continue
            started = []
            for job in array.pending.values():
                if job.held or job.begin > now:
                    continue
                if array.throttle and array.running >= array.throttle:
                    break
                tested += 1
                if tested > BF_MAX_JOB_TEST:
                    break
                key = job.key
                if key in passed:
                    continue
                if key[:-1] in nofit or key in late:
                    passed.add(key)
                    continue
                node = self._place(job, now, None)
                if node is not None and blocked is not None:
                    if reservation is None:
                        reservation = self._reserve(blocked, now) or Reservation(-1, now)
                    node = self._place(job, now, reservation)
                elif node is None and blocked is None and self._preempt_for(job, preempt):
                    node = self._place(job, now, None)
                if node is not None:
                    start(job, node)
                    started.append(job)
                    room, up_room = self._rooms()
                    continue
                if blocked is None:
                    nofit.add(key[:-1])
                    blocked = job
                elif self._place(job, now, None) is None:
                    nofit.add(key[:-1])
                else:
                    late.add(key)
                if _blocked(array, nofit, late, passed):
                    break
            for job in started:
                array.remove(job)
            if tested > BF_MAX_JOB_TEST:
                return

    def _rooms(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """The most CPUs, memory and GPUs free on one node (not always the same node), on any node
        and on the nodes that are up: a down node's resources are free and nothing can start there."""
        room = (max(self.free_cpus), max(self.free_mem), max(self.free_gpus))
        if all(self.up):
            return room, room
        up = [i for i, u in enumerate(self.up) if u]
        if not up:
            return room, (0, 0, 0)
        return room, (max(self.free_cpus[i] for i in up), max(self.free_mem[i] for i in up),
                      max(self.free_gpus[i] for i in up))

    def _floor(self) -> tuple[int, int, int]:
        """The least CPUs, memory and GPUs any pending job of the lowest tier asks for."""
        cpus = mem = gpus = 1 << 60
        for a in self.arrays:
            if a.pending and a.tier == self.lowest_tier:
                cpus, mem, gpus = min(cpus, a.need[0]), min(mem, a.need[1]), min(gpus, a.need[2])
        return cpus, mem, gpus

    def _place(self, job: Job, now: int, reservation: Reservation | None) -> int | None:
        r = job.res
        if r.cpus_per_task > max(self.free_cpus) or r.mem_mb > max(self.free_mem) or r.gpus > max(self.free_gpus):
            return None
        ends_in_time = reservation is None or now + job.res.time_min * 60 <= reservation.at
        for i in self.candidates(job):
            if self.fits(job, i) and (reservation is None or ends_in_time or i != reservation.node):
                return i
        return None

    def _reserve(self, job: Job, now: int) -> Reservation | None:
        """The earliest (node, time) the job fits, releasing running jobs by their time limits."""
        best: Reservation | None = None
        r = job.res
        for i in self.candidates(job):
            if not self.up[i] or self.cluster.nodes[i].gpus < r.gpus or (r.gpus and not self._gpu_type_ok(r, i)):
                continue
            cpus, mem, gpus = self.free_cpus[i], self.free_mem[i], self.free_gpus[i]
            ends = sorted(((j.start or now) + j.res.time_min * 60, j.jid) for j in self.on_node[i].values())
            for end, jid in ends:
                j = self.on_node[i][jid]
                cpus, mem, gpus = cpus + j.res.cpus_per_task, mem + j.res.mem_mb, gpus + j.res.gpus
                if cpus >= r.cpus_per_task and mem >= r.mem_mb and gpus >= r.gpus:
                    if best is None or end < best.at:
                        best = Reservation(i, max(end, now))
                    break
        return best

    def _preempt_for(self, job: Job, preempt: Callable[[Job], None]) -> bool:
        """partition_prio: free a node for `job` from lower-tier jobs, newest first."""
        if job.tier <= self.lowest_tier:
            return False
        for i in self.candidates(job):
            victims = sorted((j for j in self.on_node[i].values() if j.tier < job.tier),
                             key=lambda j: -(j.start or 0))
            r = job.res
            cpus, mem, gpus = self.free_cpus[i], self.free_mem[i], self.free_gpus[i]
            chosen = []
            for v in victims:
                if cpus >= r.cpus_per_task and mem >= r.mem_mb and gpus >= r.gpus:
                    break
                chosen.append(v)
                cpus, mem, gpus = cpus + v.res.cpus_per_task, mem + v.res.mem_mb, gpus + v.res.gpus
            if self.up[i] and chosen and cpus >= r.cpus_per_task and mem >= r.mem_mb and gpus >= r.gpus:
                for v in chosen:
                    preempt(v)
                return True
        return False
