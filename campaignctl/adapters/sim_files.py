"""The simulator's input files: a cluster YAML (yaml.safe_load) and a trace CSV. Every problem
names the file, the key or line, and what is allowed (SpecError: exit 3)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import yaml

from campaignctl.core.decide import split_nodes
from campaignctl.core.errors import SpecError
from campaignctl.core.sim.cluster import Cluster, Node, Partition
from campaignctl.core.sim.workload import TRACE_COLUMNS, TRACE_STATES, TraceRow
from campaignctl.core.units import parse_mem_mb

NODE_KEYS = ("name", "cpus", "mem", "gpus", "gpu_type")
PARTITION_KEYS = ("name", "nodes", "priority_tier")
CLUSTER_HINT = "see docs/simulate.md, 'The cluster file'"
TRACE_HINT = "see docs/simulate.md, 'Trace CSV'"
OPTIONAL = ("cpus", "mem_mb", "time_min", "max_rss_mb")  # empty: the spec's (max_rss_mb: from the end state)


def read_cluster(path: Path) -> Cluster:
    source = str(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecError([f"cannot read it: {e.strerror}"], source, CLUSTER_HINT) from None
    except yaml.YAMLError as e:
        raise SpecError([f"not valid YAML: {e}"], source, CLUSTER_HINT) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or not doc["nodes"]:
        raise SpecError(["nodes: a list of node groups is required (allowed keys: nodes, partitions)"],
                        source, CLUSTER_HINT)
    unknown = sorted(set(doc) - {"nodes", "partitions"})
    if unknown:
        raise SpecError([f"{unknown[0]}: unknown key; allowed: nodes, partitions"], source, CLUSTER_HINT)
    nodes = [n for i, group in enumerate(doc["nodes"]) for n in _nodes(group, f"nodes[{i}]", source)]
    names = tuple(n.name for n in nodes)
    parts = doc.get("partitions") or [{"name": "batch", "priority_tier": 1}, {"name": "high", "priority_tier": 10}]
    if not isinstance(parts, list):
        raise SpecError(["partitions: must be a list"], source, CLUSTER_HINT)
    return Cluster(tuple(nodes), tuple(_partition(p, f"partitions[{i}]", names, source) for i, p in enumerate(parts)))


def _nodes(group: Any, where: str, source: str) -> list[Node]:
    if not isinstance(group, dict):
        raise SpecError([f"{where}: must be a mapping with keys {', '.join(NODE_KEYS)}"], source, CLUSTER_HINT)
    _known(group, NODE_KEYS, where, source)
    name = group.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError([f"{where}.name: a node name or hostlist (node[1-4]) is required"], source, CLUSTER_HINT)
    cpus = _count(group, "cpus", where, source, required=True)
    gpus = _count(group, "gpus", where, source)
    gpu_type = group.get("gpu_type")
    if gpu_type is not None and not isinstance(gpu_type, str):
        raise SpecError([f"{where}.gpu_type: a GPU type name such as a100"], source, CLUSTER_HINT)
    try:
        mem = parse_mem_mb(str(group.get("mem", "")))
    except ValueError:
        raise SpecError([f"{where}.mem: {group.get('mem')!r} is not a memory size (e.g. 64G, 4000M)"],
                        source, CLUSTER_HINT) from None
    return [Node(n, cpus, mem, gpus, gpu_type if gpus else None) for n in split_nodes(name)]


def _partition(p: Any, where: str, names: tuple[str, ...], source: str) -> Partition:
    if not isinstance(p, dict) or not isinstance(p.get("name"), str):
        raise SpecError([f"{where}: a mapping with a name is required (keys: {', '.join(PARTITION_KEYS)})"],
                        source, CLUSTER_HINT)
    _known(p, PARTITION_KEYS, where, source)
    nodes = tuple(split_nodes(str(p["nodes"]))) if p.get("nodes") not in (None, "all") else names
    missing = [n for n in nodes if n not in names]
    if missing:
        raise SpecError([f"{where}.nodes: {missing[0]} is not a node of this file"], source, CLUSTER_HINT)
    return Partition(p["name"], nodes, _count(p, "priority_tier", where, source) or 1)


def _known(d: dict[str, Any], allowed: tuple[str, ...], where: str, source: str) -> None:
    for key in d:
        if key not in allowed:
            raise SpecError([f"{where}.{key}: unknown key; allowed: {', '.join(allowed)}"], source, CLUSTER_HINT)


def _count(d: dict[str, Any], key: str, where: str, source: str, required: bool = False) -> int:
    value = d.get(key, None if required else 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (required and value < 1):
        raise SpecError([f"{where}.{key}: {value!r} is not a {'positive' if required else 'non-negative'} integer"],
                        source, CLUSTER_HINT)
    return value


def read_trace(path: Path) -> list[TraceRow]:
    """Rows of a trace CSV (header line; columns in TRACE_COLUMNS; empty cpus/mem_mb/time_min: the spec's)."""
    source = str(path)
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in TRACE_COLUMNS[:6] if c not in header]
            if missing:
                raise SpecError([f"header: column {missing[0]} is missing; columns: {', '.join(TRACE_COLUMNS)}"],
                                source, TRACE_HINT)
            return [_row(r, line, source) for line, r in enumerate(reader, start=2)]
    except OSError as e:
        raise SpecError([f"cannot read it: {e.strerror}"], source, TRACE_HINT) from None


def _row(r: dict[str, str], line: int, source: str) -> TraceRow:
    def number(column: str) -> int | None:
        text = (r.get(column) or "").strip()
        if not text and column in OPTIONAL:
            return None
        try:
            value = int(float(text))
        except ValueError:
            raise SpecError([f"line {line}, {column}: {text!r} is not a number"], source, TRACE_HINT) from None
        if value < 0:
            raise SpecError([f"line {line}, {column}: {value} is negative"], source, TRACE_HINT)
        return value

    state = (r.get("final_state") or "").strip().upper()
    if state not in TRACE_STATES:
        raise SpecError([f"line {line}, final_state: {state!r}; allowed: {', '.join(TRACE_STATES)}"],
                        source, TRACE_HINT)
    return TraceRow(number("submit_s") or 0, number("duration_s") or 0, number("gpus") or 0, number("cpus"),
                    number("mem_mb"), state, number("time_min"), number("max_rss_mb"))
