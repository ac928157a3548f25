"""Login side: the cause the job-side runner wrote into an attempt's exit.json."""

from __future__ import annotations

import json
from pathlib import Path

from campaignctl.core.suspects import RankCause

EVIDENCE_LIMIT = 4096


def read_rank_causes(attempt_dir: Path) -> list[RankCause]:
    """Every rank's named cause: exit.json (rank 0, or the only process) and, in a multi-node
    attempt, each exit.rank<r>.json beside it (adapters/runner.py)."""
    found = []
    for path in sorted(attempt_dir.glob("exit*.json")):
        rank = path.name[len("exit.rank"):-len(".json")] if path.name.startswith("exit.rank") else "0"
        cause = read_cause(path)
        if cause is not None and rank.isdigit():
            found.append(RankCause(int(rank), _node(path), *cause))
    return found


def _node(path: Path) -> str:
    try:
        data = json.loads(path.read_bytes()[:256 * 1024])
    except (OSError, ValueError):
        return ""
    node = data.get("node") if isinstance(data, dict) else None
    return node if isinstance(node, str) else ""


def read_returncode(attempt_dir: Path) -> int | None:
    """The program's return code as the runner recorded it in exit.json (rank 0's, or the only
    process's; -N: killed by signal N), or None (no file yet, unreadable)."""
    try:
        with open(attempt_dir / "exit.json", "rb") as f:
            data = json.loads(f.read(256 * 1024))
    except (OSError, ValueError):
        return None
    code = data.get("returncode") if isinstance(data, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def read_cause(path: Path) -> tuple[str, str] | None:
    """(cause, evidence) from exit.json, or None: no file (the job died before the runner could
    write it, or the shared filesystem has not shown it yet), unreadable, or no cause named."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(256 * 1024))
    except (OSError, ValueError):
        return None
    cause = data.get("cause") if isinstance(data, dict) else None
    if not isinstance(cause, str) or not cause:
        return None
    evidence = data.get("evidence")
    return cause, (evidence if isinstance(evidence, str) else "")[:EVIDENCE_LIMIT]
