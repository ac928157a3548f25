"""Governance and rollback planning, pure: which decisions run in shadow or wait for approval,
when a revision is known-good, and what a rollback gives pending work back."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from campaignctl.core.decisions.action_records import record_of
from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.decisions.requests import LoggedRequest, standing_requests, with_requests
from campaignctl.core.governance.governance import (
    Awaiting,
    RevisionRun,
    apply_modes,
    expired,
    gate,
    known_good_verdict,
    proposal_key,
)
from campaignctl.core.governance.revisions import content_hash, revision_diff
from campaignctl.core.governance.rollback import LoggedChange, plan_rollback
from campaignctl.core.model.records import RevisionRecord
from campaignctl.core.policy.policy import ParamStep, Policy, Rule, policy_to_dict
from campaignctl.core.policy.policy_sections import Approval
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.decide import decide_task
from tests.core.test_decide import POLICY

FAR = datetime(9999, 1, 1)
UTC_NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def retry(task: int = 0, mem: int = 1536, rule: str = "out_of_memory", action: str = "resubmit") -> Decision:
    return Decision(task, f"s.{task}", rule, action, "why", {"attempt": 1},
                    record_of(action, {"changes": {"mem_mb": [1024, mem]}}),
                    Resources(mem_mb=mem))


# ---- shadow ------------------------------------------------------------------------------------

def test_a_shadow_rule_marks_only_its_own_decisions() -> None:
    policy = replace(POLICY, rules={**POLICY.rules, "timeout": replace(POLICY.rules["timeout"], mode="shadow")})
    out = apply_modes([retry(0), retry(1, rule="timeout")], policy, set())
    assert [(d.rule, d.mode) for d in out] == [("out_of_memory", "enforce"), ("timeout", "shadow")]


def test_a_shadow_policy_marks_every_rule_and_a_proposal_is_made_once_per_attempt() -> None:
    policy = replace(POLICY, mode="shadow")
    first = apply_modes([retry(0), retry(1)], policy, set())
    assert {d.mode for d in first} == {"shadow"}
    again = apply_modes([retry(0), retry(1)], policy, {proposal_key(policy.digest, first[0])})
    assert [d.task_index for d in again] == [1]


@pytest.mark.parametrize(("approval", "decisions", "gated"), [
    pytest.param(Approval(), [retry(mem=99999)], [""], id="no limits: nothing waits"),
    pytest.param(Approval(max_mem_mb=2048), [retry(mem=1536), retry(1, mem=3072)],
                 ["", "3072 MB of memory is above approval limit 2048"], id="memory above the limit"),
    pytest.param(Approval(max_tasks=1), [retry(0), retry(1)],
                 ["out_of_memory → resubmit on 2 tasks at once is above approval limit 1"] * 2, id="too many tasks"),
    pytest.param(Approval(always=("out_of_memory",)), [retry(0)],
                 ["the out_of_memory rule always needs approval"], id="a rule that always asks"),
    pytest.param(Approval(max_mem_mb=10), [retry(0, action="give_up")], [""], id="giving up never waits"),
])
def test_gate(approval: Approval, decisions: list[Decision], gated: list[str]) -> None:
    out = gate(decisions, replace(POLICY, approval=approval))
    assert [d.gate for d in out] == gated
    for d in out:
        if d.gate and d.resources is not None:  # carried out later exactly as decided
            assert d.params["resources"]["mem_mb"] == d.resources.mem_mb  # type: ignore[index]


def test_a_shadow_decision_never_waits_for_approval() -> None:
    shadow = replace(retry(mem=99999), mode="shadow")
    assert gate([shadow], replace(POLICY, approval=Approval(max_mem_mb=10)))[0].gate == ""


def test_expiry() -> None:
    waiting = [Awaiting(1, UTC_NOW - timedelta(hours=2)), Awaiting(2, UTC_NOW - timedelta(minutes=5))]
    assert expired(waiting, UTC_NOW, 3600) == [1]


@pytest.mark.parametrize(("run", "after_s", "good"), [
    pytest.param(RevisionRun(2, UTC_NOW - timedelta(hours=2), 3, ()), 3600, True, id="ran long enough"),
    pytest.param(RevisionRun(2, UTC_NOW - timedelta(minutes=5), 3, ()), 3600, False, id="not yet"),
    pytest.param(RevisionRun(2, UTC_NOW - timedelta(hours=2), 0, ()), 3600, False, id="nothing ran"),
    pytest.param(RevisionRun(2, UTC_NOW - timedelta(hours=2), 3, ("retry s.0 ended OUT_OF_MEMORY",)), 3600, False,
                 id="a failure its policy caused"),
])
def test_known_good(run: RevisionRun, after_s: int, good: bool) -> None:
    assert bool(known_good_verdict(run, UTC_NOW, after_s)) is good


# ---- revisions ---------------------------------------------------------------------------------

def revision(number: int, policy: Policy, spec: str = "name: x\n") -> RevisionRecord:
    return RevisionRecord(1, number, spec, "h", "/s.yaml", "t", json.dumps(policy_to_dict(policy)), "{}")


def test_the_diff_shows_a_policy_change_and_equal_content_hashes_equal() -> None:
    one, two = revision(1, POLICY), revision(2, replace(POLICY, max_failures=9))
    diff = revision_diff(one, two)
    assert '-  "max_failures": 6,' in diff and '+  "max_failures": 9,' in diff
    assert content_hash(one) == content_hash(replace(one, number=7)) != content_hash(two)


# ---- rollback ----------------------------------------------------------------------------------

def pending(token: str, mem: int, number: int = 1, gpu_type: str | None = None) -> AttemptView:
    return AttemptView(token, number, "PENDING", f"12_{token[-1]}", Resources(mem_mb=mem, gpu_type=gpu_type))


def change(i: int, revision: int, token: str, old: int, new: int, action: str = "resize_pending") -> LoggedChange:
    return LoggedChange(i, revision, token, action, {"mem_mb": [old, new]})


def test_pending_resizes_made_after_the_target_are_undone_in_place() -> None:
    views = [TaskView(1, (pending("s.1", 8000),)), TaskView(2, (pending("s.2", 1000),))]
    plan = plan_rollback(1, POLICY, views, [change(7, 2, "s.1", 1000, 8000)], FAR)
    [step] = plan.steps
    assert (step.task_index, step.action, step.rule) == (1, "resize_pending", "rollback")
    assert step.params["changes"] == {"mem_mb": [8000, 1000]} and step.resources == Resources(mem_mb=1000)
    assert step.inputs["undoes"] == [7]


def test_changes_made_at_or_before_the_target_stay() -> None:
    views = [TaskView(1, (pending("s.1", 1500),))]
    assert plan_rollback(2, POLICY, views, [change(7, 2, "s.1", 1000, 1500)], FAR).steps == []


def test_rolling_back_a_rollback_returns_to_the_later_revision() -> None:
    views = [TaskView(1, (pending("s.1", 1000),))]
    history = [change(7, 2, "s.1", 1000, 8000), change(9, 3, "s.1", 8000, 1000)]  # rev 3 rolled back to 1
    [to_two] = plan_rollback(2, POLICY, views, history, FAR).steps
    assert to_two.resources == Resources(mem_mb=8000)
    views = [TaskView(1, (pending("s.1", 8000),))]  # ... then rev 4 rolled back to 2: back to 1 again
    [to_one] = plan_rollback(1, POLICY, views, [*history, change(11, 4, "s.1", 1000, 8000)], FAR).steps
    assert to_one.resources == Resources(mem_mb=1000)


def test_a_retry_made_after_the_target_gets_the_targets_answer_to_the_same_failure() -> None:
    failed = AttemptView("s.0", 1, "OUT_OF_MEMORY", "12_0", Resources(mem_mb=1000), decided=True)
    views = [TaskView(0, (failed, pending("r.0", 8000, number=2)))]
    [step] = plan_rollback(1, POLICY, views, [change(5, 2, "r.0", 1000, 8000, "resubmit")], FAR).steps
    assert step.resources == Resources(mem_mb=1500)  # the target's 1.5x, not the bad 8x, nor no growth


def test_a_retry_the_target_would_not_have_made_is_left_alone_and_said_so() -> None:
    failed = AttemptView("s.0", 1, "OUT_OF_MEMORY", "12_0", Resources(mem_mb=1000), decided=True)
    views = [TaskView(0, (failed, pending("r.0", 8000, number=2)))]
    give_up = replace(POLICY, rules={**POLICY.rules, "out_of_memory": Rule("give_up")})
    plan = plan_rollback(1, give_up, views, [change(5, 2, "r.0", 1000, 8000, "resubmit")], FAR)
    assert plan.steps == [] and "would have given up" in plan.left_alone[0]


def test_a_gpu_type_cannot_change_in_place_so_the_element_is_cancelled_and_replaced() -> None:
    moved = LoggedChange(5, 2, "r.0", "resubmit", {"gpu_type": ["a100", "v100"]}, 0, replacement=True)
    cancelled = AttemptView("s.0", 1, "CANCELLED", "12_0", Resources(gpu_type="a100"), decided=True)
    views = [TaskView(0, (cancelled, pending("r.0", 1024, number=2, gpu_type="v100")))]
    [step] = plan_rollback(1, POLICY, views, [moved], FAR).steps
    assert step.action == "cancel" and step.params["only_if"] == "PENDING"
    assert step.params["replacement"]["gpu_type"] == "a100"  # type: ignore[index]


def test_running_and_finished_attempts_are_left_alone() -> None:
    running = AttemptView("s.1", 1, "RUNNING", "12_1", Resources(mem_mb=8000))
    views = [TaskView(1, (running,))]
    assert plan_rollback(1, POLICY, views, [change(7, 2, "s.1", 1000, 8000)], FAR).steps == []


def oom_retry_views(batch_now: int) -> list[TaskView]:
    """Attempt 1 ran out of GPU memory at batch 64; a later policy's retry waits at `batch_now`."""
    failed = AttemptView("s.0", 1, "FAILED", "12_0", Resources(), exit_code=1, decided=True,
                         cause="gpu_out_of_memory", params={"batch": 64, "lr": 0.1})
    retry = replace(pending("r.0", 1024, number=2), params={"batch": batch_now, "lr": 0.1}, params_changed=True)
    return [TaskView(0, (failed, retry))]


def halving(factor: float) -> Policy:
    rule = Rule("resubmit", max_retries=3, params={"batch": ParamStep(factor, min=1)})
    return replace(POLICY, rules={**POLICY.rules, "gpu_out_of_memory": rule})


def test_a_retry_whose_parameters_a_later_policy_chose_is_replaced_with_the_targets_parameters() -> None:
    logged = LoggedChange(5, 2, "r.0", "resubmit", {}, 0)
    [step] = plan_rollback(1, halving(0.75), oom_retry_views(16), [logged], FAR).steps
    # the batch is in the element's argv: no scontrol update can change it, so cancel and resubmit
    assert step.action == "cancel" and step.params["only_if"] == "PENDING"
    assert step.params["replacement_params"] == {"batch": 48, "lr": 0.1}
    assert "batch 16 → 48" in step.reason
    requests = standing_requests([LoggedRequest(0, "r.0", "rollback", "cancel", step.params, step.reason, "applied")])
    cancelled = replace(oom_retry_views(16)[0].attempts[1], state="CANCELLED")
    view = with_requests([TaskView(0, (oom_retry_views(16)[0].attempts[0], cancelled))], requests)[0]
    resubmit = decide_task(view, POLICY, FAR)
    assert resubmit is not None and resubmit.action == "resubmit"
    assert resubmit.params["task_params"] == {"batch": 48, "lr": 0.1}
    assert "batch 16 → 48" in resubmit.reason


def test_a_retry_already_running_the_targets_parameters_is_not_touched() -> None:
    logged = LoggedChange(5, 2, "r.0", "resubmit", {}, 0)
    assert plan_rollback(1, halving(0.5), oom_retry_views(32), [logged], FAR).steps == []
