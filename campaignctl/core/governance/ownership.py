"""Who may act on a campaign. A campaign belongs to the Unix user who created it; anyone with
the database may read it, but only its owner — and, when the spec says `share: {group: G}`,
the members of Unix group G — may change it or act on its jobs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from campaignctl.core.base.reader import Reader

SHARE_KEYS = ("group",)
# POSIX portable names as useradd/groupadd take them (shadow-utils' default NAME_REGEX, with '.')
UNIX_GROUP = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")


@dataclass(frozen=True, slots=True)
class Identity:
    """The caller, as the operating system says: user name and the names of all its groups."""

    user: str
    groups: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Ownership:
    """A campaign's owner and the group it is shared with (None: nobody else)."""

    owner: str
    share_group: str | None = None

    def may_act(self, who: Identity) -> bool:
        return who.user == self.owner or (self.share_group is not None and self.share_group in who.groups)

    def refusal(self, who: Identity, campaign: str, what: str) -> tuple[str, str] | None:
        """(message, hint) when `who` may not `what` this campaign, else None."""
        if self.may_act(who):
            return None
        shared = (f"it is shared with Unix group {self.share_group!r}, which {who.user} is not in"
                  if self.share_group else "it is shared with no group")
        return (f"{who.user} may not {what} campaign {campaign!r}: it belongs to {self.owner} and {shared}",
                f"ask {self.owner} to act, or to add `share: {{group: GROUP}}` to the spec (a group you are "
                "in) and submit it again; status, log and report stay readable")


def read_share(r: Reader) -> str | None:
    """`share: {group: NAME}`: the Unix group whose members may act on the campaign too."""
    if r.mapping(("share",), SHARE_KEYS) is None:
        return None
    return r.pattern(("share", "group"), UNIX_GROUP, "a Unix group name such as mlteam", required=True)


def share_of(settings: dict[str, object]) -> str | None:
    """The share group stored with a revision's settings (None when not shared)."""
    share = settings.get("share")
    return str(share["group"]) if isinstance(share, dict) and share.get("group") else None
