"""`log`: the decision log of a campaign, oldest first."""

from __future__ import annotations

from campaignctl.adapters.decision_log import DecisionLog, LoggedDecision
from campaignctl.adapters.store import Store
from campaignctl.core.budget import CAMPAIGN_TASK
from campaignctl.core.errors import NotFoundError
from campaignctl.services.status import find_campaign


def decision_log(name: str, task: int | None = None, limit: int | None = None) -> list[LoggedDecision]:
    store = Store.open()
    record = find_campaign(store, name)
    if task is not None and task != CAMPAIGN_TASK:
        known = sorted(store.task_params(record.id))
        if task not in known:
            raise NotFoundError(f"campaign {name!r} has no task {task}",
                                f"its tasks: {_span(known)}; --task {CAMPAIGN_TASK} shows campaign-wide decisions")
    return DecisionLog(store.engine).entries(record.id, task_index=task, limit=limit)


def _span(indices: list[int]) -> str:
    """[0, 1, 2, 3] → '0-3'; anything else listed."""
    if indices and indices == list(range(indices[0], indices[-1] + 1)) and len(indices) > 2:
        return f"{indices[0]}-{indices[-1]}"
    return ", ".join(map(str, indices)) or "none"
