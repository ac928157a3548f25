"""The simulator's input files: a cluster YAML (read as strictly as a spec: adapters/yaml_source.py)
and a trace CSV. Every problem names the file, the key or line, and what is allowed (SpecError:
exit 3); sizes are capped (MAX_NODES nodes, MAX_TASKS rows, finite numbers below MAX_NUMBER), so
no input makes a simulation run out of memory or exit 1."""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

from campaignctl.adapters.job_files import NAMED, open_regular
from campaignctl.adapters.yaml_source import load_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.base.units import parse_mem_mb
from campaignctl.core.sim.cluster import Cluster, Node, Partition
from campaignctl.core.sim.workload import MAX_TASKS, TRACE_COLUMNS, TRACE_STATES, TraceRow

NODE_KEYS = ("name", "cpus", "mem", "gpus", "gpu_type")
PARTITION_KEYS = ("name", "nodes", "priority_tier")
CLUSTER_HINT = "see docs/simulate.md, 'The cluster file'"
TRACE_HINT = "see docs/simulate.md, 'Trace CSV'"
OPTIONAL = ("cpus", "mem_mb", "time_min", "max_rss_mb")  # empty: the spec's (max_rss_mb: from the end state)
MAX_NODES = 100_000  # the largest clusters have tens of thousands
MAX_NUMBER = 10**12  # seconds, MB, CPUs: anything larger is no cluster's
MAX_TRACE_BYTES = 64 * 2**20  # 500,000 rows of a dozen short columns fit in well under this


def read_cluster(path: Path) -> Cluster:
    source = str(path)
    raw = load_yaml(path)
    if raw.problems:
        raise SpecError(list(raw.problems), source, CLUSTER_HINT)
    doc = raw.data
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or not doc["nodes"]:
        raise SpecError(["nodes: a list of node groups is required (allowed keys: nodes, partitions)"],
                        source, CLUSTER_HINT)
    unknown = sorted(set(doc) - {"nodes", "partitions"})
    if unknown:
        raise SpecError([f"{unknown[0]}: unknown key; allowed: nodes, partitions"], source, CLUSTER_HINT)
    nodes: list[Node] = []
    for i, group in enumerate(doc["nodes"]):
        nodes += _nodes(group, f"nodes[{i}]", source, MAX_NODES - len(nodes))
    names = tuple(n.name for n in nodes)
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise SpecError([f"nodes: {twice} is named twice; each node once"], source, CLUSTER_HINT)
    parts = doc.get("partitions") or [{"name": "batch", "priority_tier": 1}, {"name": "high", "priority_tier": 10}]
    if not isinstance(parts, list):
        raise SpecError(["partitions: must be a list"], source, CLUSTER_HINT)
    return Cluster(tuple(nodes), tuple(_partition(p, f"partitions[{i}]", names, source) for i, p in enumerate(parts)))


def _nodes(group: Any, where: str, source: str, room: int) -> list[Node]:
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
        mem = 0
    if not 0 < mem <= MAX_NUMBER:
        raise SpecError([f"{where}.mem: {group.get('mem')!r} is not a memory size above 0 (e.g. 64G, 4000M)"],
                        source, CLUSTER_HINT)
    try:
        hosts = split_nodes(name, limit=room)
    except ValueError as exc:
        raise SpecError([f"{where}.name: {name[:80]!r} {exc}: a file holds at most {MAX_NODES:,} nodes"],
                        source, CLUSTER_HINT) from None
    return [Node(n, cpus, mem, gpus, gpu_type if gpus else None) for n in hosts]


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
    if not isinstance(value, int) or isinstance(value, bool) or not (1 if required else 0) <= value <= MAX_NUMBER:
        raise SpecError([f"{where}.{key}: {value!r} is not a {'positive' if required else 'non-negative'} integer"],
                        source, CLUSTER_HINT)
    return value


def read_trace(path: Path) -> list[TraceRow]:
    """Rows of a trace CSV (header line; columns in TRACE_COLUMNS; empty cpus/mem_mb/time_min: the spec's)."""
    source = str(path)
    text = _trace_text(path, source)
    try:
        with io.StringIO(text, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in TRACE_COLUMNS[:6] if c not in header]
            if missing:
                raise SpecError([f"header: column {missing[0]} is missing; columns: {', '.join(TRACE_COLUMNS)}"],
                                source, TRACE_HINT)
            rows: list[TraceRow] = []
            for line, r in enumerate(reader, start=2):
                if len(rows) == MAX_TASKS:
                    raise SpecError([f"line {line}: more than {MAX_TASKS:,} rows; a simulation takes at most that "
                                     "many tasks"], source, TRACE_HINT)
                rows.append(_row(r, line, source))
            return rows
    except csv.Error as e:  # a field past csv's 128 KiB limit, a NUL byte
        raise SpecError([f"line {max(reader.line_num, 1)}: not CSV ({e})"], source, TRACE_HINT) from None


def _trace_text(path: Path, source: str) -> str:
    """The file's text: a regular file (a FIFO or /dev/zero once hung `simulate`), at most
    MAX_TRACE_BYTES, UTF-8."""
    try:
        with os.fdopen(open_regular(path, NAMED), "rb") as f:
            data = f.read(MAX_TRACE_BYTES + 1)
    except OSError as e:
        raise SpecError([f"cannot read it: {e.strerror}"], source, TRACE_HINT) from None
    if len(data) > MAX_TRACE_BYTES:
        raise SpecError([f"larger than {MAX_TRACE_BYTES // 2**20} MiB: no trace of {MAX_TASKS:,} tasks is"],
                        source, TRACE_HINT)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise SpecError([f"line {line}: byte {data[e.start]:#04x} is not UTF-8 text"], source, TRACE_HINT) from None


def _row(r: dict[str, str], line: int, source: str) -> TraceRow:
    def number(column: str) -> int | None:
        text = (r.get(column) or "").strip()
        if not text and column in OPTIONAL:
            return None
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise SpecError([f"line {line}, {column}: {text[:40]!r} is not a number"], source, TRACE_HINT)
        if not 0 <= number <= MAX_NUMBER:
            raise SpecError([f"line {line}, {column}: {text[:40]} is out of range (0 to {MAX_NUMBER:,})"],
                            source, TRACE_HINT)
        return int(number)

    state = (r.get("final_state") or "").strip().upper()
    if state not in TRACE_STATES:
        raise SpecError([f"line {line}, final_state: {state!r}; allowed: {', '.join(TRACE_STATES)}"],
                        source, TRACE_HINT)
    return TraceRow(number("submit_s") or 0, number("duration_s") or 0, number("gpus") or 0, number("cpus"),
                    number("mem_mb"), state, number("time_min"), number("max_rss_mb"))
