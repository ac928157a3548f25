"""right_size at submit: the first attempts' memory and time from the profile's history, and the
decision that records it. The figures come from core/right_size.py; the samples from one query
(adapters/profile_store.py). The in-place lowering of pending siblings is a section of the tick
(core/tick.py; its samples read by services/tick_snapshot.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from campaignctl.adapters import identity
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.profile_store import ProfileStore
from campaignctl.adapters.store import Store
from campaignctl.core.clock import UTC, stamp
from campaignctl.core.resources import Resources
from campaignctl.core.right_size import RULE, Sizing, UsageSample, propose, size_first
from campaignctl.core.spec import CampaignSpec


@dataclass(frozen=True, slots=True)
class FirstSize:
    """Tasks whose first attempts ask `resources`: the spec's, or what right_size chose."""

    resources: Resources
    tasks: list[int]
    sizing: Sizing | None = None
    group: str = ""
    mode: str = "enforce"

    def note(self) -> str:
        if self.sizing is None:
            return ""
        d = size_first("", self.tasks[0], self.tasks, self.group, self.sizing, self.mode)
        return f"right_size: {d.reason}"


def first_sizes(store: Store | None, spec: CampaignSpec, tasks: Sequence[int]) -> list[FirstSize]:
    """`tasks` grouped by what their first attempts ask. Without a right_size section or a
    `profile:` (or with too few samples), one group with the spec's resources."""
    base = spec.resources_of(tasks[0])
    section = spec.policy.right_size
    if not (section.enabled and spec.profile and tasks):
        return [FirstSize(base, list(tasks))]
    by_group, members = profile_groups(store, spec, tasks)
    mode = spec.policy.mode_of(RULE)
    caps = spec.policy.rule("out_of_memory").mem_cap_mb, spec.policy.rule("timeout").time_cap_min
    out, unsized = [], []
    for group, indices in members.items():
        sizing = propose(by_group.get(group, []), section, base, *caps)
        if sizing is None:  # too few samples: the spec's resources, one submission for all such groups
            unsized += indices
            continue
        out.append(FirstSize(sizing.apply(base) if mode == "enforce" else base, indices, sizing, group, mode))
    return out + ([FirstSize(base, sorted(unsized))] if unsized else [])


def profile_groups(store: Store | None, spec: CampaignSpec,
                   tasks: Sequence[int]) -> tuple[dict[str, list[UsageSample]], dict[str, list[int]]]:
    """The profile's samples by group (what the viewer may pool), and `tasks` by their group."""
    assert spec.profile is not None
    samples = ProfileStore((store or Store.open()).engine).samples(spec.profile.name,
                                                                   viewer=identity.current_identity())
    by_group: dict[str, list[UsageSample]] = {}
    for s in samples:
        by_group.setdefault(s.group, []).append(s)
    members: dict[str, list[int]] = {}
    for t in tasks:
        members.setdefault(spec.group_of(t), []).append(t)
    return by_group, members


def record_first_size(store: Store, spec: CampaignSpec, campaign_id: int, revision: int, token: str,
                      first_task: int, size: FirstSize) -> None:
    """The decision that sized a submission (before its sbatch), in a tick row of its own."""
    if size.sizing is None:
        return
    log = DecisionLog(store.engine)
    tick_id = log.begin_tick(f"submit {spec.name}", stamp(datetime.now(UTC)))
    decision = size_first(token, first_task, size.tasks, size.group, size.sizing, size.mode)
    log.write_intents(tick_id, campaign_id, spec.policy, [(decision, token)], [], revision)
    log.finish_tick(tick_id, "ok", 0, 1)

