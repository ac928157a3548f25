"""Replay: run `decide` over a campaign's recorded ticks, each tick as it saw the campaign. Pure.

What a tick saw is rebuilt from the store's append-only history, never from today's rows:
- an attempt exists at tick t if its submission was there: a retry submission from the tick
  AFTER the resubmit decision that created it (its group token), any other once created;
- its facts are its latest observation written at or before t (reconcile records the tick's
  observations before deciding), else it is SUBMITTED with no facts yet;
- its resources are its submission's, or those of an applied `resize_pending` of an earlier tick;
- `decided` holds what the REPLAYED policy answered (resubmit/give up) in earlier ticks, and the
  attempts a recorded early-stopping `stop` ended (that rule is not replayed: its stop is history).

History after a divergence is what actually happened: a replayed give-up does not remove the
retry the recorded policy made, so later ticks still show it. Replay answers "what would this
policy have decided, tick by tick, given what was observed", not "what would have happened".
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from campaignctl.core.decide import Decision, decide
from campaignctl.core.observe import task_views
from campaignctl.core.policy import Policy
from campaignctl.core.records import AttemptFacts, HistoryRow
from campaignctl.core.requests import STANDING_ACTIONS, LoggedRequest, Requests, standing_requests, with_requests
from campaignctl.core.spec import Resources

ANSWERS = ("resubmit", "give_up")  # decisions that answer an attempt for good
REPLAYED_ACTIONS = (*ANSWERS, "resize_pending")  # what `decide` produces; other rules are not replayed


@dataclass(frozen=True, slots=True)
class RecordedTick:
    id: int
    clock: datetime  # the UTC time its rules compared against (ticks.clock, core/clock.py)
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


@dataclass(frozen=True, slots=True)
class CampaignHistory:
    ticks: tuple[RecordedTick, ...]  # oldest first
    attempts: tuple[RecordedAttempt, ...]
    observations: tuple[RecordedObservation, ...]
    decisions: tuple[RecordedDecision, ...]  # every mode and action, oldest first


@dataclass(frozen=True, slots=True)
class ReplayedDecision:
    tick_id: int
    decision: Decision


class Timeline:
    """Indexes over a campaign's history that answer "what did tick t see"."""

    def __init__(self, history: CampaignHistory) -> None:
        self.history = history
        self._obs: dict[int, list[RecordedObservation]] = {}
        for o in sorted(history.observations, key=lambda o: o.tick_id):  # stable: write order within a tick
            self._obs.setdefault(o.attempt_id, []).append(o)
        self._obs_ticks = {a: [o.tick_id for o in obs] for a, obs in self._obs.items()}
        enforced = [d for d in history.decisions if d.mode == "enforce"]
        # the resubmit decision whose group token is a retry submission's token created it
        self._born = {d.group_token: d.tick_id for d in enforced if d.action == "resubmit" and d.group_token}
        self._resizes: dict[str, list[tuple[int, str]]] = {}
        for d in enforced:
            if d.action == "resize_pending" and d.status == "applied" and "resources" in d.params:
                self._resizes.setdefault(d.attempt_token, []).append(
                    (d.tick_id, json.dumps(d.params["resources"], sort_keys=True)))
        self._requests = [d for d in history.decisions if d.action in STANDING_ACTIONS]
        self._stops = [(d.tick_id, d.attempt_token) for d in enforced if d.action == "stop" and d.status == "applied"]

    def exists(self, attempt: RecordedAttempt, tick: RecordedTick) -> bool:
        born = self._born.get(attempt.submission_token)
        if attempt.submission_kind == "retry" and born is not None:
            return tick.id > born
        return attempt.created_at <= tick.started_at  # an initial array, or a retry approved later

    def observation(self, attempt: RecordedAttempt, tick_id: int) -> RecordedObservation | None:
        ticks = self._obs_ticks.get(attempt.id, [])
        at = bisect.bisect_right(ticks, tick_id)
        return self._obs[attempt.id][at - 1] if at else None

    def resources_json(self, attempt: RecordedAttempt, tick_id: int) -> str:
        """Its submission's resources, or those of the last resize decided before this tick. A
        resize that found the element already started left it alone: `resized` is then False."""
        if attempt.resized:
            earlier = [r for t, r in self._resizes.get(attempt.token, []) if t < tick_id]
            if earlier:
                return earlier[-1]
        return attempt.submission_resources_json

    def resources(self, attempt: RecordedAttempt, tick_id: int) -> Resources:
        return Resources(**json.loads(self.resources_json(attempt, tick_id)))

    def rows(self, tick: RecordedTick) -> list[HistoryRow]:
        rows = [self._row(a, tick.id) for a in self.history.attempts if self.exists(a, tick)]
        return sorted(rows, key=lambda r: (r.task_index, r.attempt_number))

    def _row(self, a: RecordedAttempt, tick_id: int) -> HistoryRow:
        o = self.observation(a, tick_id)
        failed = o is not None and o.facts.state == "FAILED"  # the cause is read when sacct first shows FAILED
        f = o.facts if o else AttemptFacts("SUBMITTED")
        return HistoryRow(a.id, a.task_index, a.attempt_number, a.array_index, a.token, a.job_id, f.state,
                          f.slurm_state, f.exit_code, f.nodes, f.elapsed_s, f.max_rss, f.ended_at, f.missing_since,
                          self.resources_json(a, tick_id), a.submission_token, "released", a.created_at.isoformat(),
                          a.params_json, a.params_changed, a.cause if failed else None, a.evidence if failed else "")

    def stopped(self, tick_id: int) -> set[str]:
        """Attempts an applied early-stopping decision of an earlier tick answered."""
        return {token for t, token in self._stops if t < tick_id}

    def requests(self, tick_id: int) -> Requests:
        """Standing utilisation/fallback requests as earlier ticks left them (as reconcile reads
        them: the log's outcome as it stands now, which for these is written in the same tick)."""
        return standing_requests(LoggedRequest(d.task_index, d.attempt_token, d.rule, d.action, d.params,
                                               d.reason, d.status)
                                 for d in self._requests if d.tick_id < tick_id)


def replay(history: CampaignHistory, policy: Policy, gpu_types: Sequence[str] = ()) -> list[ReplayedDecision]:
    """`policy`'s decisions, tick by tick, over the recorded observations (and output causes)."""
    timeline = Timeline(history)
    decided: set[str] = set()
    out: list[ReplayedDecision] = []
    for tick in history.ticks:
        views = with_requests(task_views(timeline.rows(tick), decided | timeline.stopped(tick.id)),
                              timeline.requests(tick.id))
        for d in decide(views, policy, tick.clock, gpu_types):
            out.append(ReplayedDecision(tick.id, d))
            if d.action in ANSWERS:
                decided.add(d.attempt_token)
    return out


def actual_decisions(history: CampaignHistory) -> list[RecordedDecision]:
    """What was really decided of the kinds `decide` makes (a shadow proposal was not)."""
    return [d for d in history.decisions if d.mode == "enforce" and d.action in REPLAYED_ACTIONS]


def not_replayed(history: CampaignHistory) -> dict[str, int]:
    """Enforced decisions of other rules (utilisation, fallback, budget, throttle), by action."""
    counts: dict[str, int] = {}
    for d in history.decisions:
        if d.mode == "enforce" and d.action not in REPLAYED_ACTIONS:
            counts[d.action] = counts.get(d.action, 0) + 1
    return counts


def recorded_policies(decisions: Sequence[RecordedDecision]) -> list[tuple[str, str]]:
    """(label, digest) of the policies that made the enforced decisions, first use first."""
    seen: dict[tuple[str, str], None] = {}
    for d in decisions:
        if d.mode == "enforce":
            seen.setdefault((d.policy, d.policy_digest), None)
    return list(seen)
