"""Slurm host lists (`node[1-3],gpu7`). Pure."""

from __future__ import annotations

from functools import lru_cache


def split_nodes(nodelist: str, limit: int | None = None) -> list[str]:
    """`node[1-3],gpu7` → node1 node2 node3 gpu7 (Slurm hostlist; ranges and lists inside []).
    With `limit`, ValueError for a list naming more hosts (counted before any is made:
    `n[1-100000000]` would be 10⁸ strings)."""
    if limit is not None and (size := hostlist_size(nodelist)) > limit:
        raise ValueError(f"names {size:,} nodes, more than {limit:,}")
    return list(_split(nodelist))


@lru_cache(maxsize=4096)
def _split(nodelist: str) -> tuple[str, ...]:
    """A tick splits the same few lists (its attempts' nodes, its exclusions) thousands of times."""
    out = [host for item in _items(nodelist) for host in _expand_host(item)]
    return tuple(n for n in out if n and n != "None assigned")


def hostlist_size(nodelist: str) -> int:
    """How many hosts `nodelist` names, without naming them."""
    total = 0
    for item in _items(nodelist):
        body = item.partition("[")[2].partition("]")[0] if "[" in item else ""
        for piece in body.split(",") if body else [""]:
            lo, _, hi = piece.partition("-")
            total += max(1, int(hi) - int(lo) + 1) if lo.isdigit() and hi.isdigit() else 1
    return total


def _items(nodelist: str) -> list[str]:
    """The top-level comma-separated items (commas inside [] belong to their item)."""
    out: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(nodelist + ","):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(nodelist[start:i].strip())
            start = i + 1
    return out


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
