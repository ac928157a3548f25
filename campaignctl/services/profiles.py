"""`campaignctl profile list|show`: the profiles the store's campaigns name and, per profile,
the distribution of what their ended attempts used (core/packing/profile_stats.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from campaignctl.adapters import identity
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import NotFoundError
from campaignctl.core.packing.profile_stats import CampaignUse, GroupStats, campaign_use, profile_stats
from campaignctl.core.policy.right_size_section import RightSize


@dataclass(frozen=True, slots=True)
class ProfileRow:
    name: str
    campaigns: list[str]
    samples: int
    right_sized: int
    wrong: int


@dataclass(frozen=True, slots=True)
class ProfileList:
    profiles: list[ProfileRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"profiles": [vars_of(p) for p in self.profiles]}


@dataclass(frozen=True, slots=True)
class ProfileShow:
    name: str
    groups: list[GroupStats]
    campaigns: list[CampaignUse]
    section: RightSize  # what `would ask` assumes: the default right_size section

    def to_dict(self) -> dict[str, object]:
        s = self.section
        return {"profile": self.name, "groups": [g.to_dict() for g in self.groups],
                "campaigns": [c.to_dict() for c in self.campaigns],
                "would_ask_with": {"mem": [s.mem.quantile, s.mem.margin], "time": [s.time.quantile, s.time.margin],
                                   "min_samples": s.min_samples}}


def vars_of(row: ProfileRow) -> dict[str, object]:
    return {f.name: getattr(row, f.name) for f in fields(row)}


def list_profiles() -> ProfileList:
    profiles = Store.open().profiles
    named: dict[str, list[str]] = {}
    for pc in profiles.campaigns():
        named.setdefault(pc.profile, []).append(pc.name)
    rows = []
    for name, campaigns in sorted(named.items()):
        samples = profiles.samples(name, viewer=identity.current_identity())
        rows.append(ProfileRow(name, campaigns, len(samples), sum(s.right_sized for s in samples),
                               sum(s.wrong for s in samples)))
    return ProfileList(rows)


def show_profile(name: str) -> ProfileShow:
    profiles = Store.open().profiles
    known = sorted({pc.profile for pc in profiles.campaigns()})
    if name not in known:
        raise NotFoundError(f"no campaign names profile {name!r}", f"known profiles: {', '.join(known) or 'none yet'}"
                                                                  " (a spec's `profile:` key names one)")
    samples = profiles.samples(name, viewer=identity.current_identity())
    section = RightSize(enabled=True)
    return ProfileShow(name, profile_stats(samples), campaign_use(samples, section), section)
