"""`log`: the decision log of a campaign, oldest first."""

from __future__ import annotations

from campaignctl.adapters.decision_log import DecisionLog, LoggedDecision
from campaignctl.adapters.store import Store
from campaignctl.services.status import find_campaign


def decision_log(name: str, task: int | None = None, limit: int | None = None) -> list[LoggedDecision]:
    store = Store.open()
    record = find_campaign(store, name)
    return DecisionLog(store.engine).entries(record.id, task_index=task, limit=limit)
