"""Job side: name the cause of a failed program from the tail of its output.log, for exit.json.

Runs once, at exit, only when the program failed. Reads at most the last 64 KiB (a training
log can be gigabytes on a shared filesystem), from a line boundary, and never raises: a cause
is a hint for the policy, and a missing one leaves the plain `failed` rule in charge.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from campaignctl.core.policy.output_causes import TAIL_BYTES, match_output, site_signatures


def read_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - limit))
        data = f.read(limit)
    if size > limit:
        data = data.partition(b"\n")[2]  # the first line is cut: drop it
    return data.decode("utf-8", errors="replace")


def output_cause(log_path: Path, returncode: int, site_causes: Sequence[tuple[str, str]] = ()) -> dict[str, object]:
    """`{"cause": name or None, "evidence": text}` for exit.json."""
    if returncode == 0:
        return {"cause": None, "evidence": ""}
    try:
        match = match_output(read_tail(log_path), site_signatures(site_causes))
    except (OSError, ValueError) as exc:  # unreadable log or a bad pattern from an older payload
        return {"cause": None, "evidence": f"output not matched: {exc}"}
    if match is None:
        return {"cause": None, "evidence": ""}
    return {"cause": match.cause, "evidence": match.evidence}
