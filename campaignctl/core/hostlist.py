"""Slurm host lists (`node[1-3],gpu7`). Pure."""

from __future__ import annotations


def split_nodes(nodelist: str) -> list[str]:
    """`node[1-3],gpu7` → node1 node2 node3 gpu7 (Slurm hostlist; ranges and lists inside [])."""
    out: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(nodelist + ","):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.extend(_expand_host(nodelist[start:i].strip()))
            start = i + 1
    return [n for n in out if n and n != "None assigned"]


def _expand_host(item: str) -> list[str]:
    if "[" not in item:
        return [item]
    prefix, _, rest = item.partition("[")
    body, _, suffix = rest.partition("]")
    hosts: list[str] = []
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        width = len(lo)
        hosts.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(int(lo), int(hi or lo) + 1))
    return hosts
