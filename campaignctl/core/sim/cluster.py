"""The simulated cluster's shape: nodes (CPUs, memory, one type of GPU), partitions with a
PriorityTier, and the default shape built from a campaign's resources. Pure.

Slurm's `PreemptType=preempt/partition_prio`: a job of a partition with a higher PriorityTier
may preempt jobs of lower tiers on the nodes it needs (the lab cluster: batch tier 1, high tier 10)."""

from __future__ import annotations

from dataclasses import dataclass

from campaignctl.core.resources import Resources

DEFAULT_NODES = 8  # nodes of the default shape
TASKS_PER_NODE = 8  # the default node fits this many of the campaign's tasks
PREEMPTOR_PARTITION = "high"  # where the higher-priority jobs that preempt campaign work run


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpus: int
    mem_mb: int
    gpus: int = 0
    gpu_type: str | None = None


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    priority_tier: int = 1


@dataclass(frozen=True, slots=True)
class Cluster:
    nodes: tuple[Node, ...]
    partitions: tuple[Partition, ...]

    def partition(self, name: str | None) -> Partition:
        """The named partition (None: the first, Slurm's Default=YES)."""
        for p in self.partitions:
            if name is None or p.name == name:
                return p
        raise KeyError(name)

    def top_partition(self) -> Partition:
        return max(self.partitions, key=lambda p: p.priority_tier)


def default_cluster(r: Resources, gpu_types: tuple[str, ...]) -> Cluster:
    """8 nodes, each fitting 8 of the campaign's tasks; GPU types alternate over the nodes in the
    spec's order; the campaign's partition (tier 1) and a `high` partition (tier 10) over all."""
    types = gpu_types or ((r.gpu_type,) if r.gpu_type else ("gpu",))
    nodes = tuple(Node(f"node{i + 1}", max(2, r.cpus_per_task * TASKS_PER_NODE), r.mem_mb * TASKS_PER_NODE,
                       r.gpus * TASKS_PER_NODE, types[i % len(types)] if r.gpus else None)
                  for i in range(DEFAULT_NODES))
    names = tuple(n.name for n in nodes)
    return Cluster(nodes, (Partition(r.partition or "batch", names, 1), Partition(PREEMPTOR_PARTITION, names, 10)))
