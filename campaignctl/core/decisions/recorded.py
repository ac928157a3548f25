"""A campaign's history as the store recorded it (adapters/history_store.py reads it): its ticks,
attempts, observations, decisions with their outcomes, telemetry and metric reports. What replay
(core/governance/replay.py) rebuilds each tick's view from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from campaignctl.core.decisions.action_records import ActionRecord, record_of
from campaignctl.core.model.records import AttemptFacts
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.usage.telemetry import Summary


@dataclass(frozen=True, slots=True)
class RecordedTick:
    id: int
    clock: datetime  # the UTC time its rules compared against (ticks.clock, core/base/clock.py)
    started_at: datetime  # aware (UTC in the store): orders ticks against submissions' created_at


@dataclass(frozen=True, slots=True)
class RecordedAttempt:
    id: int
    task_index: int
    attempt_number: int
    array_index: int
    token: str
    job_id: str | None
    submission_token: str
    submission_kind: str  # initial | retry
    submission_resources_json: str
    resized: bool  # the attempt has resources of its own: an in-place resize took effect
    created_at: datetime  # aware
    params_json: str = "{}"  # the task parameters it ran with (a rule's, else the task's)
    params_changed: bool = False
    cause: str | None = None  # named by its output once it FAILED
    evidence: str = ""
    alloc_tres: str = ""  # what Slurm allocated (as last stored)
    array_throttle: int | None = None  # its array's `%N` as stored now (the last throttle applied)
    packed: bool = False  # it shared its array element with other tasks (core/pack_plan.py)


@dataclass(frozen=True, slots=True)
class RecordedObservation:
    attempt_id: int
    tick_id: int
    facts: AttemptFacts


@dataclass(frozen=True, slots=True)
class RecordedDecision:
    id: int
    tick_id: int
    task_index: int
    attempt_token: str
    policy: str
    policy_digest: str
    rule: str
    action: str
    params: Mapping[str, object]
    reason: str
    mode: str  # enforce | shadow
    group_token: str
    status: str  # the outcome: applied | failed | proposed | pending (none written) …
    inputs: Mapping[str, object] = field(default_factory=dict)

    @property
    def typed(self) -> ActionRecord:
        return record_of(self.action, self.params)


@dataclass(frozen=True, slots=True)
class RecordedPoint:
    """One metric report of an attempt."""

    attempt_id: int
    task_index: int
    step: int
    name: str
    value: float
    t: float | None  # when the task reported it (epoch seconds); None: not said


@dataclass(frozen=True, slots=True)
class CampaignHistory:
    ticks: tuple[RecordedTick, ...]  # oldest first
    attempts: tuple[RecordedAttempt, ...]
    observations: tuple[RecordedObservation, ...]
    decisions: tuple[RecordedDecision, ...]  # every mode and action, oldest first
    settings: CampaignSettings | None = None  # the current revision's; None: only the cause rules replay
    summaries: Mapping[int, Summary] = field(default_factory=dict)  # attempt id → telemetry as stored
    points: tuple[RecordedPoint, ...] = ()  # metric reports, in report order
