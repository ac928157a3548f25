"""`policy replay`: a policy file's decisions over a campaign's recorded history, against what
was actually decided, with the worst-case cost of each side's retries."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from campaignctl.adapters.optuna_sampler import OptunaSampler
from campaignctl.adapters.policy_source import load_policy
from campaignctl.adapters.store import Store
from campaignctl.core.decisions.action_records import ResizePending, Resubmit
from campaignctl.core.decisions.recorded import CampaignHistory, RecordedDecision
from campaignctl.core.governance.replay import Timeline, actual_decisions, not_replayed, recorded_policies, replay
from campaignctl.core.governance.replay_compare import Comparison, Difference, compare, resubmitted_resources
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.cost import Amount
from campaignctl.services.campaigns import current_policy, find_campaign

CAVEATS = (
    "history after a divergence is what actually happened: the replayed policy would have caused "
    "other attempts, which no replay can observe; later decisions are over the recorded attempts",
    "replayed: every section of the tick (core/tick/tick.py) — retries, give-ups and resizes, budget alerts, "
    "holds and admission throttles, utilisation, GPU-type fallback, early stopping, promotion, max_parallel — "
    "with the current revision's settings; not replayed: known-good marks, approvals and their expiry "
    "(a decision the gate holds counts as made), and a person's `resume` (its release is history for both sides)",
    "squeue's pending reasons and sinfo's free GPUs are not recorded: a task is moved to another GPU type only "
    "at a tick where the recorded policy moved one (its decision wrote them down)",
    "telemetry is stored as one summary per attempt with its latest samples only: utilisation at a tick sees "
    "the samples up to that tick's clock, so a decision made early in a long attempt may not be reproduced",
    "right_size's in-place lowering sees the attempts ended by each tick with sacct's MaxRSS (not their "
    "telemetry peak), and lowers a replayed task again at a later tick if the recorded side did not lower it",
    "metric points count from the time the task reported them (an undated point from the first tick); "
    "spend at a tick is priced from the attempts' observed states and elapsed times, with the allocation "
    "last stored",
    "cost: each side's resubmits, the new attempt at its time limit, priced with the replayed policy",
)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    campaign: str
    policy: str  # label of the replayed policy
    policy_digest: str
    policy_file: str
    recorded_policies: list[str]  # label (digest) of the policies that made the recorded decisions
    current_policy: str
    ticks: int
    reproduced: int
    actual_decisions: int
    replayed_decisions: int
    differences: list[Difference]
    actual_cost: Amount
    replay_cost: Amount
    cost_delta: Amount
    not_replayed: dict[str, int] = field(default_factory=dict)  # other recorded decisions, by action
    only_actual: dict[str, int] = field(default_factory=dict)  # "rule → action": made by the recorded side alone
    only_replay: dict[str, int] = field(default_factory=dict)  # … by the replayed policy alone
    caveats: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "identical": self.identical}


def replay_policy(policy_file: str, name: str) -> ReplayResult:
    policy = load_policy(policy_file, str(Path.cwd()))  # a bad file: SpecError naming file, line, key
    store = Store.open()
    record = find_campaign(store, name)
    history = store.histories.campaign_history(record)
    current, _ = current_policy(store, record)
    actual = actual_decisions(history)
    sampler = OptunaSampler() if history.settings is not None and history.settings.search else None
    comparison = compare(actual, replay(history, policy, sampler), policy.prices, _resources_given(history),
                         {a.token: a.attempt_number for a in history.attempts})
    return _result(record.name, policy_file, policy.described, policy.digest, history, current.label, comparison)


def _resources_given(history: CampaignHistory) -> Callable[[RecordedDecision], Resources | None]:
    """A recorded decision → the resources it gave: a resize's new ones; a resubmit's retry
    submission's (or, were that missing, the attempt's then resources with the decision's changes)."""
    timeline = Timeline(history)
    retry = {a.submission_token: a.submission_resources_json for a in history.attempts}
    attempt = {a.token: a for a in history.attempts}

    def given(d: RecordedDecision) -> Resources | None:
        p = d.typed
        if isinstance(p, ResizePending):
            return p.resources
        if not isinstance(p, Resubmit):
            return None
        if d.group_token in retry:
            return Resources(**json.loads(retry[d.group_token]))
        old = attempt.get(d.attempt_token)
        if old is None:
            return None
        return resubmitted_resources(timeline.resources(old, d.tick_id), p.changes)

    return given


def _result(name: str, policy_file: str, label: str, digest: str, history: CampaignHistory, current: str,
            c: Comparison) -> ReplayResult:
    only_actual, only_replay = c.made_by_one_side()
    return ReplayResult(
        campaign=name, policy=label, policy_digest=digest, policy_file=policy_file,
        recorded_policies=[f"{p} ({d})" for p, d in recorded_policies(history.decisions)],
        current_policy=current, ticks=len(history.ticks), reproduced=c.reproduced,
        actual_decisions=c.actual, replayed_decisions=c.replayed, differences=list(c.differences),
        actual_cost=c.actual_cost, replay_cost=c.replay_cost, cost_delta=c.cost_delta,
        not_replayed=not_replayed(history), only_actual=only_actual, only_replay=only_replay,
        caveats=list(CAVEATS))
