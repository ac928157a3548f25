"""The spec's `profile:` key: a kind of work whose history is pooled across campaigns (right_size).

    profile: nanogpt-small                       # samples grouped by rung
    profile: {name: nanogpt-small, by: [model]}  # and by these task parameters
    profile: {name: nanogpt-small, shared: true} # other users' campaigns may pool these samples

A profile pools the campaigns of its caller's own and those shared with a group of theirs;
another user's campaign counts only when its spec says `shared: true` (adapters/profile_store.py):
a shared database holds everyone's history, and a poisoned sample sizes the next submit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.base.reader import Reader
from campaignctl.core.base.safety import CAMPAIGN_NAME
from campaignctl.core.model.params import TaskSpec

PROFILE_KEYS = ("name", "by", "shared")
_NAME = "1-64 characters from A-Z a-z 0-9 _ . -, starting with a letter or digit, e.g. nanogpt-small"


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    by: tuple[str, ...] = ()  # task parameters that split the profile into groups
    shared: bool = False  # other users' right-sizing may pool this campaign's samples


def group_of(rung: int, params: Mapping[str, object], by: Sequence[str]) -> str:
    """`rung 0`, or `rung 0, model=gpt2` with `by: [model]`."""
    if not by:
        return f"rung {rung}"
    return ", ".join([f"rung {rung}", *(f"{k}={params.get(k)}" for k in by)])


def read_profile(r: Reader, tasks: Sequence[TaskSpec]) -> Profile | None:
    value = r.get(("profile",))
    if isinstance(value, dict):
        r.mapping(("profile",), PROFILE_KEYS)
        name = r.pattern(("profile", "name"), CAMPAIGN_NAME, _NAME, required=True)
        return Profile(name, _by(r, tasks), r.boolean(("profile", "shared"), False)) if name else None
    name = r.pattern(("profile",), CAMPAIGN_NAME, _NAME)
    return Profile(name) if name else None


def _by(r: Reader, tasks: Sequence[TaskSpec]) -> tuple[str, ...]:
    value = r.get(("profile", "by"))
    if value is None or value is Reader.MISSING:
        return ()
    known = {k for t in tasks for k in t.params}
    if not isinstance(value, list) or not all(isinstance(v, str) and v in known for v in value):
        r.problem(("profile", "by"), "must be a list of task parameter names from matrix/tasks: "
                                     + (", ".join(sorted(known)) or "(the spec has none)"))
        return ()
    return tuple(value)
