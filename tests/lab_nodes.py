"""The lab cluster's nodes by GPU type, as its slurmctld lists them. The labs name their nodes
apart (22.05: node1…, 24.11: trixie1…; scripts/slurmlab) so that both can run at once, so a
real-cluster test asks which nodes have a100s rather than naming them."""

from __future__ import annotations

import functools
import os

from campaignctl.adapters import proc


@functools.cache
def _features(slurm_conf: str) -> dict[str, tuple[str, ...]]:
    out = proc.run(["sinfo", "-h", "-N", "-o", "%N %f"]).stdout  # a node in two partitions is listed twice
    by_feature: dict[str, list[str]] = {}
    for line in out.splitlines():
        node, _, features = line.partition(" ")
        for feature in features.split(","):
            if node not in by_feature.setdefault(feature, []):
                by_feature[feature].append(node)
    return {f: tuple(sorted(nodes)) for f, nodes in by_feature.items()}


def nodes_with(feature: str) -> tuple[str, ...]:
    """The nodes whose Feature= includes `feature` (the lab's a100 or v100 nodes), sorted."""
    nodes = _features(os.environ["SLURM_CONF"]).get(feature, ())
    assert nodes, f"the lab has no node with feature {feature}"
    return nodes


def all_nodes() -> tuple[str, ...]:
    return tuple(sorted({n for nodes in _features(os.environ["SLURM_CONF"]).values() for n in nodes}))
