"""Helpers every service shares to reach a campaign: looking one up by the name a user typed."""

from __future__ import annotations

from campaignctl.adapters.store import Store
from campaignctl.core.errors import NotFoundError
from campaignctl.core.records import CampaignRecord


def find_campaign(store: Store, name: str) -> CampaignRecord:
    """The campaign named `name`, or NotFoundError (exit 4) listing the known ones."""
    record = store.campaign(name)
    if record is None:
        known = ", ".join(c.name for c in store.campaigns()) or "none yet"
        raise NotFoundError(f"no campaign named {name!r}", f"known campaigns: {known}")
    return record


def find_campaigns(store: Store, name: str | None) -> list[CampaignRecord]:
    """Every campaign when no name is given, else the one named (NotFoundError if none is)."""
    return store.campaigns() if name is None else [find_campaign(store, name)]
