"""Progressive campaigns (successive halving on job arrays): which rung a task belongs to, and
when and whom to promote into the next rung. Pure.

Tasks of a campaign with `rungs` are numbered rung by rung: config c of rung r is task
r × configs + c, so rung 0 is exactly the configs of the matrix, in their order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def configs_of(settings: Mapping[str, Any]) -> int:
    """How many configs each rung has (the settings stored with a revision); 0 without rungs."""
    return int(settings.get("configs") or 0) if settings.get("rungs") else 0


def rung_of(task_index: int, settings: Mapping[str, Any]) -> int:
    configs = configs_of(settings)
    return task_index // configs if configs else 0


def config_of(task_index: int, settings: Mapping[str, Any]) -> int:
    configs = configs_of(settings)
    return task_index % configs if configs else task_index


def rung_names(settings: Mapping[str, Any]) -> list[str]:
    """Rung names in order; a campaign without rungs has one unnamed rung."""
    rungs = settings.get("rungs") or []
    return [str(r.get("name") or f"rung{i}") for i, r in enumerate(rungs)] or [""]
