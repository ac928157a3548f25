"""The one place services ask whether the caller may change a campaign (core/governance/ownership.py):
every changing command calls `require_may_act` before it touches anything."""

from __future__ import annotations

import json

from campaignctl.adapters import identity
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import PermissionDeniedError
from campaignctl.core.governance.ownership import Ownership, share_of
from campaignctl.core.model.records import CampaignRecord


def ownership(store: Store, record: CampaignRecord) -> Ownership:
    """The owner, and the share group of the current revision."""
    settings = json.loads(store.revision(record.id, record.current_revision).settings_json)
    return Ownership(record.owner, share_of(settings))


def may_act(store: Store, record: CampaignRecord) -> bool:
    return ownership(store, record).may_act(identity.current_identity())


def require_may_act(store: Store, record: CampaignRecord, what: str, other_way: str = "") -> None:
    """Raise PermissionDeniedError (exit 77) when the caller may not `what` (a verb: "roll
    back", "set the policy of") this campaign; `other_way` ends the hint ("or …")."""
    refused = ownership(store, record).refusal(identity.current_identity(), record.name, what)
    if refused is not None:
        message, hint = refused
        raise PermissionDeniedError(message, f"{hint}; {other_way}" if other_way else hint)


def require_owner_for_share_change(store: Store, record: CampaignRecord, new_group: str | None) -> None:
    """Only the owner may grant, change or withdraw the share group: a member may act, not
    widen or narrow who else may."""
    current = ownership(store, record)
    who = identity.current_identity().user
    if new_group != current.share_group and who != current.owner:
        raise PermissionDeniedError(
            f"{who} may not change who campaign {record.name!r} is shared with (now "
            f"{current.share_group or 'nobody'}, asked {new_group or 'nobody'}): only its owner "
            f"{current.owner} may",
            f"keep `share: {{group: {current.share_group}}}` as it is, or ask {current.owner}")
