"""Early stopping (median stopping rule) as tables: which running task is stopped on recorded
curves, and when none is (grace, too few peers, twice, ties, other rungs, the goal)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.decisions.requests import LoggedRequest, standing_requests
from campaignctl.core.governance.governance import apply_modes, gate
from campaignctl.core.model.training_metrics import Curve
from campaignctl.core.policy.policy import Policy
from campaignctl.core.policy.policy_sections import Approval, EarlyStopping
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.early_stop import decide_early_stops, standing

LOSS = EarlyStopping(metric="val_loss", goal="min", grace_steps=3, min_peers=3)


def running(index: int, state: str = "RUNNING", decided: bool = False) -> TaskView:
    return TaskView(index, (AttemptView(f"s.{index}", 1, state, f"12_{index}", Resources(), decided=decided),))


def curve(*values: float, start: int = 1) -> Curve:
    """Values at steps start, start + 1, …"""
    return tuple((start + i, v) for i, v in enumerate(values))


# Five tasks at step 5. The median rule stops every task worse than the median of the others, so
# for exactly one to trail the others tie or lead: tasks 0-2 share a curve, task 4 leads, task 3 trails.
GOOD = curve(0.9, 0.7, 0.6, 0.55, 0.5)
BAD = curve(1.2, 1.1, 1.0, 0.95, 0.9)
FIVE = {0: GOOD, 1: GOOD, 2: GOOD, 3: BAD, 4: curve(0.7, 0.6, 0.55, 0.5, 0.45)}


def stopped(curves: dict[int, Curve], views: list[TaskView] | None = None, section: EarlyStopping = LOSS,
            rungs: dict[int, int] | None = None, fired: frozenset[tuple[str, str]] = frozenset()) -> list[int]:
    views = [running(t) for t in curves] if views is None else views
    return [d.task_index for d in decide_early_stops(views, curves, rungs or {}, section, fired)]


def test_the_trailing_task_is_stopped_with_its_evidence() -> None:
    [d] = decide_early_stops([running(t) for t in FIVE], FIVE, {}, LOSS, set())
    assert (d.task_index, d.attempt_token, d.rule, d.action) == (3, "s.3", "early_stopping", "stop")
    assert d.params == {"only_if": "RUNNING"} and d.resources is None and d.mode == "enforce"
    assert d.inputs == {"job_id": "12_3", "attempt": 1, "state": "RUNNING", "metric": "val_loss", "goal": "min",
                        "step": 5, "value": 0.9, "median": 0.5,
                        "peers": {"0": 0.5, "1": 0.5, "2": 0.5, "4": 0.45}, "peer_count": 4, "rung": 0,
                        "grace_steps": 3, "min_peers": 3}
    assert d.reason == ("val_loss 0.9 at step 5 is worse than the median 0.5 of 4 peers at that step "
                        "(lower is better); stopped (median rule).")


@pytest.mark.parametrize(("curves", "views", "section", "rungs", "fired", "expected"), [
    pytest.param(FIVE, None, LOSS, None, frozenset(), [3], id="the trailing task"),
    pytest.param({t: c[:2] for t, c in FIVE.items()}, None, LOSS, None, frozenset(), [],
                 id="not before grace_steps"),
    pytest.param({t: c[:3] for t, c in FIVE.items()}, None, LOSS, None, frozenset(), [3],
                 id="at grace_steps exactly"),
    pytest.param({**FIVE, 3: (*BAD, (6, 0.9))}, None, LOSS, None, frozenset(), [],
                 id="peers that have not reached its step do not count"),
    pytest.param({t: FIVE[t] for t in (0, 1, 3)}, None, LOSS, None, frozenset(), [], id="too few peers"),
    pytest.param({t: FIVE[t] for t in (0, 1, 3)}, None, replace(LOSS, min_peers=2), None, frozenset(), [3],
                 id="enough with min_peers 2"),
    pytest.param(FIVE, None, LOSS, None, frozenset({("s.3", "early_stopping")}), [], id="not twice"),
    pytest.param(FIVE, [running(t, decided=t == 3) for t in FIVE], LOSS, None, frozenset(), [],
                 id="an attempt a stop already answers"),
    pytest.param(FIVE, [running(t) for t in FIVE if t != 3] + [running(3, "PENDING")], LOSS, None, frozenset(), [],
                 id="only a running attempt"),
    pytest.param(FIVE, [running(3)], LOSS, None, frozenset(), [3], id="finished peers count"),
    pytest.param(FIVE, None, replace(LOSS, goal="max"), None, frozenset(), [4],
                 id="goal max: the other way round"),
    pytest.param(FIVE, None, replace(LOSS, rule="none"), None, frozenset(), [], id="rule none: off"),
    pytest.param(FIVE, None, replace(LOSS, metric=""), None, frozenset(), [], id="no metric: off"),
])
def test_who_is_stopped(curves: dict[int, Curve], views: list[TaskView] | None, section: EarlyStopping,
                        rungs: dict[int, int] | None, fired: frozenset[tuple[str, str]], expected: list[int]) -> None:
    assert stopped(curves, views, section, rungs, fired) == expected


def test_goal_max_stops_the_lowest_accuracy() -> None:
    accuracy = curve(0.3, 0.5, 0.6, 0.7)
    curves = {0: accuracy, 1: accuracy, 2: accuracy, 3: curve(0.1, 0.15, 0.2, 0.25)}
    acc = replace(LOSS, metric="acc", goal="max")
    [d] = decide_early_stops([running(t) for t in curves], curves, {}, acc, set())
    assert (d.task_index, d.inputs["value"], d.inputs["median"]) == (3, 0.25, 0.7)
    assert "acc 0.25 at step 4 is worse than the median 0.7 of 3 peers" in d.reason and "(higher is better)" in d.reason
    assert stopped(curves, section=replace(acc, goal="min")) == []  # as a loss, 0.1 would lead


def test_peers_only_from_the_same_rung() -> None:
    # rung 0 (tasks 0-3): task 3's 0.9 trails; rung 1 (tasks 4-7, longer runs that started worse):
    # task 5's 1.2 trails, and 0.9 would lead there
    rung1 = curve(1.5, 1.4, 1.3, 1.2, 1.1)
    curves = {0: GOOD, 1: GOOD, 2: GOOD, 3: BAD, 4: rung1, 5: curve(1.6, 1.5, 1.4, 1.3, 1.2), 6: rung1, 7: rung1}
    rungs = {t: t // 4 for t in curves}
    assert stopped(curves, rungs=rungs) == [3, 5]
    assert standing(7, curves, rungs, "min").peers == {4: 1.1, 5: 1.2, 6: 1.1}  # type: ignore[union-attr]
    assert stopped(curves) == [4, 5, 6, 7]  # one pool: the median of rung 0 and 1 together is 0.9


def test_a_tie_with_the_median_is_not_stopped() -> None:
    curves = {0: curve(0.5, 0.5, 0.5), 1: curve(0.6, 0.6, 0.6), 2: curve(0.7, 0.7, 0.7), 3: curve(0.6, 0.6, 0.6)}
    assert standing(3, curves, {}, "min").median == 0.6  # type: ignore[union-attr]
    assert stopped(curves) == [2]  # 0.7 > 0.6; task 3's 0.6 equals the median of 0.5, 0.6, 0.7


def test_judged_by_the_best_so_far_and_peers_at_the_same_step() -> None:
    curves = {0: curve(0.4, 0.9, 0.9), 1: curve(0.6, 0.6, 0.6, 0.1, 0.1), 2: curve(0.6, 0.6, 0.6, 0.1),
              3: curve(0.6, 0.6, 0.6, 0.1)}
    seen = standing(0, curves, {}, "min")
    assert seen is not None and (seen.step, seen.value) == (3, 0.4)  # its best, not its last 0.9
    assert dict(seen.peers) == {1: 0.6, 2: 0.6, 3: 0.6}  # their bests up to step 3, not their later 0.1
    assert 0 not in stopped(curves)


def test_a_retry_is_judged_on_the_task_curve_and_a_task_without_points_is_not() -> None:
    retried = {**FIVE, 3: (*FIVE[3], (3, 0.95), (4, 0.92))}  # attempt 2 resumed from step 2
    assert stopped(retried) == [3]  # the task's latest step is still 5; its best 0.9
    assert standing(9, FIVE, {}, "min") is None


def test_mode_shadow_makes_it_propose_only_and_approval_can_gate_it() -> None:
    decisions = decide_early_stops([running(t) for t in FIVE], FIVE, {}, LOSS, set())
    shadow = Policy(early_stopping=replace(LOSS, mode="shadow"))
    assert [d.mode for d in apply_modes(decisions, shadow, set())] == ["shadow"]
    assert [d.mode for d in apply_modes(decisions, Policy(early_stopping=LOSS), set())] == ["enforce"]
    gated = gate(decisions, Policy(approval=Approval(always=("early_stopping",))))
    assert [d.gate for d in gated] == ["the early_stopping rule always needs approval"]


@pytest.mark.parametrize(("status", "fired"), [("applied", True), ("failed", True), ("awaiting-approval", True),
                                               ("proposed", False)])
def test_a_logged_stop_fires_once_per_attempt_unless_only_proposed(status: str, fired: bool) -> None:
    logged = LoggedRequest(3, "s.3", "early_stopping", "stop", {"only_if": "RUNNING"}, "why", status)
    assert (("s.3", "early_stopping") in standing_requests([logged]).fired) is fired
