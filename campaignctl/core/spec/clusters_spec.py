"""`clusters:` — the Slurm clusters a campaign may run on, behind one accounting database (their
names as `sacctmgr show clusters` lists them), each with what differs there. Pure.

    clusters: [lab, lab2]                  # the same partition, GPU type names and account on both
    clusters:
      - lab
      - {name: lab2, partition: gpu, gpu_type: a100_80g, account: proj2, qos: normal}

No `clusters:`: the campaign lives on the cluster SLURM_CONF names, as always, its job ids plain.
With it (one cluster or several): every submission names its cluster (`sbatch -M`), every job id
is qualified by it (core/slurm/job_ref.py), and placement chooses where each array goes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from campaignctl.core.base.reader import Reader
from campaignctl.core.base.safety import SLURM_WORD
from campaignctl.core.resources import Resources

CLUSTER_KEYS = ("name", "partition", "gpu_type", "account", "qos", "constraint")
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")  # sacctmgr's cluster names; never `:`
MAX_CLUSTERS = 16


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """One cluster and what a task asks for there instead of the spec's `resources:`."""

    name: str
    partition: str | None = None
    gpu_type: str | None = None  # the GPU type's name on this cluster (sites name the same card apart)
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None

    def resources(self, base: Resources) -> Resources:
        """`base` (what the spec asks) as this cluster names it."""
        given = {k: v for k in CLUSTER_KEYS[1:] if (v := getattr(self, k)) is not None}
        if "gpu_type" in given and not base.gpus:
            del given["gpu_type"]
        return replace(base, **given) if given else base

    def to_settings(self) -> dict[str, str]:
        return {k: v for k in CLUSTER_KEYS if (v := getattr(self, k)) is not None}


def read_clusters(r: Reader) -> tuple[ClusterSpec, ...]:
    """`clusters:` as a list of names or `{name: …, partition: …}` mappings; () when absent."""
    value = r.get(("clusters",))
    if value is Reader.MISSING or value is None:
        return ()
    if not isinstance(value, list) or not value:
        r.problem(("clusters",), "must be a list of cluster names (as `sacctmgr show clusters` lists them), "
                                 "e.g. [lab, lab2], or of mappings {name: lab2, partition: gpu}")
        return ()
    if len(value) > MAX_CLUSTERS:
        r.problem(("clusters",), f"names {len(value)} clusters; at most {MAX_CLUSTERS}")
        return ()
    out = []
    for i, item in enumerate(value):
        path = ("clusters", i)
        if isinstance(item, dict):
            r.mapping(path, CLUSTER_KEYS)
            name = r.pattern((*path, "name"), CLUSTER_NAME, "a cluster name such as lab2", required=True)
            fields = {k: r.pattern((*path, k), SLURM_WORD, f"a {k} name") for k in ("partition", "gpu_type",
                                                                                    "account", "qos")}
            constraint = r.string((*path, "constraint"))
            if name:
                out.append(ClusterSpec(name, constraint=constraint, **fields))
        else:
            name = r.pattern(path, CLUSTER_NAME, "a cluster name such as lab2 (letters, digits, _ and -)")
            if name:
                out.append(ClusterSpec(name))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        r.problem(("clusters",), f"names a cluster twice: {', '.join(twice)}")
    return tuple(out)


def clusters_from_settings(value: Any) -> tuple[ClusterSpec, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(ClusterSpec(**{k: str(v) for k, v in item.items() if k in CLUSTER_KEYS})
                 for item in value if isinstance(item, Mapping) and isinstance(item.get("name"), str))


def names(clusters: Sequence[ClusterSpec]) -> tuple[str, ...]:
    return tuple(c.name for c in clusters)
