"""`log`: the decision log of a campaign, oldest first."""

from __future__ import annotations

from campaignctl.adapters.decision_log import LoggedDecision
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import NotFoundError
from campaignctl.core.screens.status import index_ranges
from campaignctl.core.tick.budget import CAMPAIGN_TASK
from campaignctl.services.campaigns import find_campaign


def decision_log(name: str, task: int | None = None, limit: int | None = None) -> list[LoggedDecision]:
    """Every row as written (pending tasks resized alike share one, their tasks in its params);
    with `task`, that task's decisions, a shared row's among them."""
    store = Store.open()
    record = find_campaign(store, name)
    if task is not None and task != CAMPAIGN_TASK:
        known = sorted(store.task_params(record.id))
        if task not in known:
            raise NotFoundError(f"campaign {name!r} has no task {task}", f"its tasks: {index_ranges(known) or 'none'}; "
                                f"--task {CAMPAIGN_TASK} shows campaign-wide decisions")
    return store.log.entries(record.id, task_index=task, limit=limit, grouped=task is None)

