"""Packing at submit: which of a submission's first attempts share jobs and GPUs (core/packing.py
chooses; the profile's history is read once, as right-sizing reads it), and the decision that
records the choice with its evidence before the sbatch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.core.clock import UTC, stamp
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing import PackChoice, choose_shape, pack_decision
from campaignctl.core.resources import Resources
from campaignctl.core.spec import CampaignSpec
from campaignctl.services.right_size import profile_groups


@dataclass(frozen=True, slots=True)
class PackGroup:
    """Tasks that go out packed alike (`choice` None: the spec has no pack:)."""

    tasks: list[int]
    group: str = ""
    choice: PackChoice | None = None

    @property
    def shape(self) -> PackShape | None:
        return self.choice.shape if self.choice else None

    def note(self) -> str:
        return f"pack: {self.group or 'all tasks'}: {self.choice.why}" if self.choice else ""


def pack_groups(store: Store | None, spec: CampaignSpec, tasks: Sequence[int], each: Resources) -> list[PackGroup]:
    """`tasks` (first attempts asking `each`) by how they are packed. `pack: auto` chooses per
    profile group, from the history of that group."""
    pack = spec.pack
    if pack is None or not tasks:
        return [PackGroup(list(tasks))]
    if not pack.auto or spec.profile is None:
        return [PackGroup(list(tasks), "", choose_shape(pack, each, []))]
    by_group, members = profile_groups(store, spec, tasks)
    return [PackGroup(indices, group, choose_shape(pack, each, by_group.get(group, [])))
            for group, indices in members.items()]


def record_pack(store: Store, spec: CampaignSpec, campaign_id: int, revision: int, token: str,
                tasks: Sequence[int], group: PackGroup) -> None:
    """The decision that packed a submission (or left it unpacked under `pack:`), in a tick row
    of its own, before its sbatch."""
    if group.choice is None:
        return
    log = DecisionLog(store.engine)
    tick_id = log.begin_tick(f"submit {spec.name}", stamp(datetime.now(UTC)))
    log.write_intents(tick_id, campaign_id, spec.policy, [(pack_decision(token, tasks, group.group, group.choice),
                                                           token)], [], revision)
    log.finish_tick(tick_id, "ok", 0, 1)
