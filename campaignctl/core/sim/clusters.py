"""Several clusters in one simulation (`simulate --clusters N`), and what the tick's placement and
move rules read of them. Pure.

The clusters are copies of one shape, each a partition of its own nodes (`alpha-node1`, …) in one
simulated queue: a job of cluster `alpha` is a job of partition `alpha`, and never runs elsewhere.
A job off the first cluster has its id qualified as reconcile records it (`beta:12_3`,
core/slurm/job_ref.py). Slurm's own estimates are modelled as the backfill scheduler makes them:
by time limits, never by real run times — each pending job in priority order takes the earliest
slot a running or earlier job frees by its limit; a new job would start after all of them
(`sbatch --test-only`). A slot is one of the campaign's tasks' requests on a node."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from campaignctl.core.base.clock import stamp
from campaignctl.core.model.params import Scalar
from campaignctl.core.placement.moves import MoveFacts
from campaignctl.core.placement.placement import Placer, Prediction
from campaignctl.core.resources import Resources
from campaignctl.core.sim.cluster import PREEMPTOR_PARTITION, Cluster, Node, Partition
from campaignctl.core.sim.scheduler import Array, Job, Queue
from campaignctl.core.spec.clusters_spec import ClusterSpec

ONE, AT_SUBMIT, AND_MOVE = "one-cluster", "placed", "placed+moves"  # the placement policies compared
MODES = (ONE, AT_SUBMIT, AND_MOVE)
BACKGROUND = -3  # the task of another user's job on the busy cluster (a preemptor's is -1, a pack host's -2)


def several(shape: Cluster, names: Sequence[str]) -> Cluster:
    """`names` clusters of `shape`'s nodes, each its own partition (tier 1) named after it; the
    preemptors' `high` partition (tier 10) spans them all, as each cluster's own would."""
    nodes = tuple(Node(f"{name}-{n.name}", n.cpus, n.mem_mb, n.gpus, n.gpu_type)
                  for name in names for n in shape.nodes)
    per = len(shape.nodes)
    parts = tuple(Partition(name, tuple(n.name for n in nodes[i * per:(i + 1) * per]), 1)
                  for i, name in enumerate(names))
    return Cluster(nodes, (*parts, Partition(PREEMPTOR_PARTITION, tuple(n.name for n in nodes), 10)))


def slots(queue: Queue, partition: str, unit: Resources) -> int:
    """How many `unit` requests the partition's up nodes hold at once."""
    total = 0
    for i in queue.part_nodes[partition]:
        node = queue.cluster.nodes[i]
        if not queue.up[i]:
            continue
        fit = min(node.cpus // max(unit.cpus_per_task, 1), node.mem_mb // max(unit.mem_mb, 1))
        total += min(fit, node.gpus // unit.gpus) if unit.gpus else fit
    return total


def estimates(queue: Queue, partition: str, now: int, unit: Resources) -> tuple[dict[str, int], int]:
    """When each pending job of `partition` is expected to start (by job id), and when a new one
    would: slots freed by the running jobs' time limits, taken in priority order."""
    free = [now] * slots(queue, partition, unit)
    running = [job for i in queue.part_nodes[partition] for job in queue.on_node[i].values()]
    ends = sorted(max(now, (job.start or now) + job.res.time_min * 60) for job in running)
    for k, end in enumerate(ends[:len(free)]):
        free[k] = end
    heapq.heapify(free)
    if not free:
        return {}, 1 << 40
    out = {}
    for array in queue.arrays:
        if array.partition != partition:
            continue
        for job in array.pending.values():
            at = max(heapq.heappop(free), job.begin)
            out[job.jid] = at
            heapq.heappush(free, at + job.res.time_min * 60)
    return out, free[0]


Item = tuple[int, int, Resources, dict[str, Scalar]]  # what the engine submits: task, attempt, request, params


def add_background(array: Array, count: int, res: Resources) -> None:
    """Other users' queue on the busy cluster, ahead of the campaign: `count` jobs of `res` each."""
    for i in range(count):
        array.add(Job(f"{array.id}_{i}", array, BACKGROUND, 1, f"other{i}", res, -1))


def predictions(queue: Queue, clusters: Sequence[str], now: int, unit: Resources,
                at: Callable[[int], datetime]) -> dict[str, Prediction]:
    """When each cluster would start a new element now (`sbatch -M <c> --test-only`)."""
    return {c: Prediction(stamp(at(estimates(queue, c, now, unit)[1]))) for c in clusters}


def placed(items: Sequence[Item], clusters: Sequence[str], policy: str, to: dict[int, str],
           last: Callable[[int], str | None], predicted: Callable[[], Mapping[str, Prediction]],
           per_array: int = 1000) -> dict[str, list[Item]]:
    """Where each item goes: a move's replacement to its cluster (`to`, consumed), a retry where its
    task last ran, first attempts by `policy`: all on the first cluster (ONE), else each array of
    `per_array` where a new element would start soonest (core/placement/placement.py's Placer)."""
    out: dict[str, list[Item]] = {}
    first = []
    for item in items:
        target = to.pop(item[0], None) or last(item[0])
        if target is None:
            first.append(item)
        else:
            out.setdefault(target, []).append(item)
    if first and policy == ONE:
        out.setdefault(clusters[0], []).extend(first)
    elif first:
        placer = Placer(clusters, predicted())
        for lo in range(0, len(first), per_array):
            chunk = first[lo:lo + per_array]
            out.setdefault(placer.place(len(chunk)).cluster, []).extend(chunk)
    return out


def move_facts(queue: Queue, clusters: Sequence[ClusterSpec], unit: Resources, now: int,
               at: Callable[[int], datetime]) -> MoveFacts:
    """What the move rule reads (core/placement/moves.py): every pending job's expected start on its
    own cluster, as squeue prints it, and when each cluster would start a new one; all answer."""
    queued: dict[str, tuple[str, str]] = {}
    offers = {}
    for c in clusters:
        pending, new = estimates(queue, c.name, now, unit)
        queued.update({jid: (at(t).strftime("%Y-%m-%dT%H:%M:%S"), "Priority") for jid, t in pending.items()})
        offers[c.name] = Prediction(stamp(at(new)))
    names = frozenset(c.name for c in clusters)
    return MoveFacts(tuple(clusters), unit, clusters[0].name, names, queued, offers)


def busy_jobs(cluster: Cluster, names: Sequence[str], unit: Resources, hours: float) -> int:
    """Other users' one-hour jobs that keep the first cluster's slots full for `hours`."""
    if not names or hours <= 0:
        return 0
    queue = Queue(cluster)
    return int(slots(queue, names[0], unit) * hours)
