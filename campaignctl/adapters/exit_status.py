"""Login side: the cause the job-side runner wrote into an attempt's exit.json."""

from __future__ import annotations

import json
from pathlib import Path

EVIDENCE_LIMIT = 4096


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
