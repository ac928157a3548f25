"""replay(): the views each recorded tick saw, rebuilt from history; compare(): how replayed
decisions line up with the recorded ones, and what each side's retries cost."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import datetime, timedelta, timezone

import pytest

from campaignctl.core.decisions.action_records import record_of
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.decisions.recorded import (
    CampaignHistory,
    RecordedAttempt,
    RecordedDecision,
    RecordedObservation,
    RecordedTick,
)
from campaignctl.core.governance.replay import ReplayedDecision, Timeline, actual_decisions, not_replayed, replay
from campaignctl.core.governance.replay_compare import compare, worst_case
from campaignctl.core.model.records import AttemptFacts
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.cost import Amount
from tests.core.test_decide import POLICY, with_rule

NOW = datetime(2026, 11, 21, 12, 0)
BASE = Resources(mem_mb=1000, time_min=60)


def tick(n: int, minutes: float = 0) -> RecordedTick:
    """Tick n, its clock `minutes` after NOW; it started n seconds after the campaign was created."""
    return RecordedTick(n, NOW + timedelta(minutes=minutes), NOW.replace(tzinfo=timezone.utc) + timedelta(seconds=n))


def attempt(id: int, task: int, number: int = 1, sub: str = "s1", kind: str = "initial",
            resources: Resources = BASE, resized: bool = False) -> RecordedAttempt:
    return RecordedAttempt(id, task, number, task, f"{sub}.{task}", f"{10 + number}_{task}", sub, kind,
                           json.dumps(asdict(resources)), resized, NOW.replace(tzinfo=timezone.utc))


def obs(attempt_id: int, tick_id: int, state: str, exit_code: int | None = 0,
        ended_at: str | None = None) -> RecordedObservation:
    return RecordedObservation(attempt_id, tick_id, AttemptFacts(state, state, exit_code, "node1", 3, "", ended_at))


def logged(id: int, tick_id: int, token: str, rule: str, action: str, task: int = 0, group: str = "",
           status: str = "applied", mode: str = "enforce", **params: object) -> RecordedDecision:
    return RecordedDecision(id, tick_id, task, token, "test@v1", "d1", rule, action, params, "why", mode,
                            group, status)


def history(ticks: list[RecordedTick], attempts: list[RecordedAttempt], observations: list[RecordedObservation],
            decisions: list[RecordedDecision] = ()) -> CampaignHistory:  # type: ignore[assignment]
    return CampaignHistory(tuple(ticks), tuple(attempts), tuple(observations), tuple(decisions))


def made(result: list[ReplayedDecision]) -> list[tuple[int, int, str, str]]:
    return [(r.tick_id, r.decision.task_index, r.decision.rule, r.decision.action) for r in result]


# --- what a tick saw ----------------------------------------------------------------------------

def test_a_tick_sees_each_attempts_latest_observation_at_or_before_it_and_submitted_before_any() -> None:
    h = history([tick(1), tick(2), tick(3)], [attempt(1, 0), attempt(2, 1)],
                [obs(1, 1, "PENDING"), obs(1, 2, "RUNNING"), obs(1, 3, "OUT_OF_MEMORY"), obs(2, 3, "PENDING")])
    timeline = Timeline(h)
    assert [(r.task_index, r.state) for r in timeline.rows(h.ticks[1])] == [(0, "RUNNING"), (1, "SUBMITTED")]
    assert [(r.task_index, r.state) for r in timeline.rows(h.ticks[2])] == [(0, "OUT_OF_MEMORY"), (1, "PENDING")]


def test_a_retry_attempt_exists_from_the_tick_after_the_resubmit_that_created_it() -> None:
    retry = attempt(2, 0, number=2, sub="r1", kind="retry")
    h = history([tick(1), tick(2)], [attempt(1, 0), retry], [obs(1, 1, "OUT_OF_MEMORY")],
                [logged(1, 1, "s1.0", "out_of_memory", "resubmit", group="r1")])
    timeline = Timeline(h)
    assert [r.attempt_number for r in timeline.rows(h.ticks[0])] == [1]
    assert [r.attempt_number for r in timeline.rows(h.ticks[1])] == [1, 2]


def test_resources_are_the_submissions_until_an_applied_resize_of_an_earlier_tick() -> None:
    resized = replace(BASE, mem_mb=1500)
    decision = logged(1, 1, "s1.1", "out_of_memory", "resize_pending", task=1, resources=asdict(resized))
    h = history([tick(1), tick(2)], [attempt(1, 1, resized=True)], [], [decision])
    timeline = Timeline(h)
    assert timeline.resources(h.attempts[0], 1) == BASE  # the tick that resized saw the old ones
    assert timeline.resources(h.attempts[0], 2) == resized
    started_meanwhile = replace(h.attempts[0], resized=False)  # scontrol said it was no longer pending
    assert timeline.resources(started_meanwhile, 2) == BASE
    failed = history(h.ticks, h.attempts, [], [replace(decision, status="failed")])  # type: ignore[arg-type]
    assert Timeline(failed).resources(h.attempts[0], 2) == BASE


# --- replaying decide -------------------------------------------------------------------------

def test_a_backoff_delays_the_decision_to_the_first_tick_whose_clock_is_past_it() -> None:
    ended = NOW.isoformat()
    h = history([tick(1, 0.5), tick(2, 2), tick(3, 6)], [attempt(1, 0)], [obs(1, 1, "FAILED", 75, ended)])
    assert made(replay(h, POLICY)) == [(2, 0, "failed", "resubmit")]  # backoff 1m
    assert made(replay(h, with_rule("failed", backoff_s=300))) == [(3, 0, "failed", "resubmit")]


def test_an_attempt_the_replayed_policy_answered_is_not_decided_again_in_later_ticks() -> None:
    h = history([tick(1), tick(2), tick(3)], [attempt(1, 0)], [obs(1, 1, "FAILED", 3)])
    assert made(replay(h, POLICY)) == [(1, 0, "failed", "give_up")]


def test_the_replayed_policys_answers_count_not_the_recorded_ones() -> None:
    """The log says the OOM was answered (given up); the replayed policy has not answered it yet."""
    h = history([tick(1), tick(2)], [attempt(1, 0)], [obs(1, 2, "OUT_OF_MEMORY")],
                [logged(1, 1, "s1.0", "out_of_memory", "give_up")])
    assert made(replay(h, POLICY)) == [(2, 0, "out_of_memory", "resubmit")]


def test_an_attempt_a_recorded_stop_ended_is_answered_not_given_up_as_cancelled() -> None:
    """Early stopping is not replayed: its applied stop is history, and the CANCELLED it caused
    is no failure for the `cancelled` rule to answer."""
    h = history([tick(1), tick(2), tick(3)], [attempt(1, 0)], [obs(1, 1, "RUNNING"), obs(1, 2, "CANCELLED")],
                [logged(1, 1, "s1.0", "early_stopping", "stop", only_if="RUNNING")])
    assert made(replay(h, with_rule("cancelled", action="give_up"))) == []
    failed_stop = replace(h, decisions=(replace(h.decisions[0], status="failed"),))
    assert made(replay(failed_stop, with_rule("cancelled", action="give_up"))) == [(2, 0, "cancelled", "give_up")]
    assert not_replayed(h) == {"stop": 1}


def test_pending_siblings_are_resized_once_then_seen_with_their_new_resources() -> None:
    attempts = [attempt(1, 0), attempt(2, 1, resized=True), attempt(3, 2, resized=True)]
    seen = [obs(1, 1, "OUT_OF_MEMORY"), obs(2, 1, "PENDING"), obs(3, 1, "PENDING")]
    # the retry recorded the nodes it was sized by (sinfo): a node holds as many at 1500M
    sized = replace(logged(9, 1, "s1.0", "out_of_memory", "resubmit", status="failed"),
                    inputs={"node_shapes": [[64, 256000, 0]]})
    h = history([tick(1), tick(2)], attempts, seen, [sized])
    first = replay(h, POLICY)
    assert made(first) == [(1, 0, "out_of_memory", "resubmit"), (1, 1, "out_of_memory", "resize_pending"),
                           (1, 2, "out_of_memory", "resize_pending")]
    assert first[1].decision.resources == replace(BASE, mem_mb=1500)
    assert made(replay(replace(h, decisions=()), POLICY)) == [(1, 0, "out_of_memory", "resubmit")]  # nodes unknown
    # with the recorded resizes applied, tick 2 sees 1500 MB: nothing to resize again
    resizes = [logged(i, 1, f"s1.{t}", "out_of_memory", "resize_pending", task=t,
                      resources=asdict(replace(BASE, mem_mb=1500))) for i, t in ((1, 1), (2, 2))]
    assert len(replay(replace(h, decisions=(sized, *resizes)), POLICY)) == 3


def test_recorded_decisions_of_other_rules_are_counted_not_replayed() -> None:
    h = history([tick(1)], [attempt(1, 0)], [], [
        logged(1, 1, "s1.0", "max_parallel", "throttle"), logged(2, 1, "s1.0", "failed", "give_up"),
        logged(3, 1, "s1.0", "failed", "resubmit", mode="shadow")])
    assert [d.id for d in actual_decisions(h)] == [2]
    assert not_replayed(h) == {"throttle": 1}


# --- comparing ----------------------------------------------------------------------------------

def replayed(tick_id: int, token: str, rule: str, action: str, resources: Resources | None = None,
             **changes: list[object]) -> ReplayedDecision:
    typed = record_of(action, {"changes": changes})
    return ReplayedDecision(tick_id, Decision(0, token, rule, action, "why", {}, typed, resources))


BIGGER = replace(BASE, mem_mb=1500)
LONGER = replace(BASE, time_min=180)

# recorded, replayed, expected (kind, note fragment) or None when reproduced as is
CASES = [
    pytest.param([logged(1, 1, "a", "out_of_memory", "resubmit", changes={"mem_mb": [1000, 1500]})],
                 [replayed(1, "a", "out_of_memory", "resubmit", BIGGER, mem_mb=[1000, 1500])], None, id="same"),
    pytest.param([logged(1, 1, "a", "failed", "resubmit")], [replayed(3, "a", "failed", "resubmit", BASE)],
                 ("delayed", "tick 3, not tick 1"), id="same, later tick"),
    pytest.param([logged(1, 1, "a", "out_of_memory", "resubmit", changes={"mem_mb": [1000, 1500]})],
                 [replayed(1, "a", "out_of_memory", "give_up")], ("changed", ""), id="other action"),
    pytest.param([logged(1, 1, "a", "timeout", "resubmit", changes={"time_min": [60, 90]})],
                 [replayed(2, "a", "timeout", "resubmit", LONGER, time_min=[60, 180])],
                 ("changed", "later: tick 2"), id="other resources, later"),
    pytest.param([logged(1, 1, "a", "timeout", "resize_pending", changes={"time_min": [60, 90]})],
                 [replayed(1, "a", "out_of_memory", "resize_pending", BIGGER, mem_mb=[1000, 1500])],
                 ("changed", ""), id="resize for another cause"),
    pytest.param([logged(1, 1, "a", "failed", "give_up")], [], ("only_actual", ""), id="only recorded"),
    pytest.param([], [replayed(1, "a", "failed", "give_up")], ("only_replay", ""), id="only replayed"),
    pytest.param([logged(1, 1, "a", "timeout", "resize_pending", changes={"time_min": [60, 90]})],
                 [replayed(1, "a", "timeout", "resubmit", LONGER, time_min=[60, 90])],
                 ("only_actual", ""), id="a resize and an answer are different decisions"),
]


@pytest.mark.parametrize(("recorded", "ours", "expected"), CASES)
def test_decisions_match_by_attempt_and_kind_of_act(recorded: list[RecordedDecision], ours: list[ReplayedDecision],
                                                     expected: tuple[str, str] | None) -> None:
    result = compare(recorded, ours, Prices(), lambda d: BASE, {"a": 1})
    kinds = [d.kind for d in result.differences]
    if expected is None:
        assert kinds == [] and result.reproduced == 1 and result.identical
        return
    assert kinds[0] == expected[0] and expected[1] in result.differences[0].note
    assert result.reproduced == (1 if expected[0] == "delayed" else 0)
    assert result.differences[0].attempt == 1


def test_each_sides_resubmits_cost_their_new_attempt_at_its_time_limit_in_the_replayed_prices() -> None:
    prices = Prices(gpu_hour={"a100": 3.0, "default": 2.0}, cpu_hour=0.5)
    gpu = Resources(gpus=2, gpu_type="a100", cpus_per_task=4, time_min=90)
    assert worst_case(gpu, prices) == Amount(3.0, 6.0, 2 * 3.0 * 1.5 + 4 * 0.5 * 1.5)
    recorded = [logged(1, 1, "a", "timeout", "resubmit", changes={"time_min": [60, 90]}),
                logged(2, 1, "b", "failed", "give_up")]
    ours = [replayed(1, "a", "timeout", "give_up"), replayed(1, "b", "failed", "resubmit", gpu)]
    result = compare(recorded, ours, prices, lambda d: gpu if d.action == "resubmit" else None, {})
    assert result.actual_cost == worst_case(gpu, prices) == result.replay_cost
    assert result.cost_delta == Amount(0.0, 0.0, 0.0)
    cheaper = compare(recorded, ours[:1], prices, lambda d: gpu if d.action == "resubmit" else None, {})
    assert cheaper.replay_cost == Amount() and cheaper.cost_delta.money == pytest.approx(-12.0)
