"""Spend and the budget guard as tables: spent from elapsed × allocated TRES, committed up to the
time limit, projected for pending work; warn, admission throttle, hold + pause."""

from __future__ import annotations

from dataclasses import replace

import pytest

from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.spec import Budget, Resources
from campaignctl.core.tick.budget import assess, guard, pending_elements
from campaignctl.core.usage.cost import UsageGroup, campaign_spend, parse_alloc_tres

PRICES = Prices(gpu_hour={"a100": 3.0, "v100": 1.0, "default": 2.0}, cpu_hour=0.1)
ONE_GPU_HOUR = Resources(gpus=1, gpu_type="a100", cpus_per_task=2, time_min=60)


def group(phase: str, n: int, elapsed_s: int = 0, tres: str = "", res: Resources = ONE_GPU_HOUR) -> UsageGroup:
    return UsageGroup(phase, res, tres, n, elapsed_s)


def pending_views(n: int, array: str = "12") -> list[TaskView]:
    return [TaskView(i, (AttemptView(f"t.{i}", 1, "PENDING", f"{array}_{i}", ONE_GPU_HOUR),)) for i in range(n)]


@pytest.mark.parametrize(("text", "cpus", "gpus", "gpu_type"), [
    ("billing=2,cpu=2,gres/gpu:a100=1,gres/gpu=1,mem=200M,node=1", 2, 1, "a100"),  # lab cluster, job line
    ("cpu=1,mem=100M,node=1,billing=1", 1, 0, None),
    ("billing=4,cpu=4,gres/gpu=2,mem=8G,node=1", 4, 2, None),  # untyped GPUs
])
def test_alloc_tres_is_read_as_slurm_prints_it(text: str, cpus: int, gpus: int, gpu_type: str | None) -> None:
    alloc = parse_alloc_tres(text)
    assert alloc is not None and (alloc.cpus, alloc.gpus, alloc.gpu_type) == (cpus, gpus, gpu_type)


def test_spend_uses_what_slurm_allocated_not_what_was_asked() -> None:
    # asked for 2 CPUs, Slurm gave 4 (whole cores): 30 min cost 2 CPU-h, not 1
    spend = campaign_spend([group("ended", 1, 1800, "cpu=4,gres/gpu:a100=1,gres/gpu=1")], PRICES)
    assert (spend.spent.gpu_hours, spend.spent.cpu_hours) == (0.5, 2.0)
    assert spend.spent.money == pytest.approx(0.5 * 3.0 + 2.0 * 0.1)


def test_running_work_is_spent_so_far_and_committed_up_to_its_limit_pending_is_projected() -> None:
    spend = campaign_spend([group("ended", 2, 2 * 3600, "cpu=2,gres/gpu:a100=1,gres/gpu=1"),
                            group("running", 2, 2 * 900, "cpu=2,gres/gpu:a100=1,gres/gpu=1"),
                            group("pending", 3)], PRICES)
    assert spend.spent.gpu_hours == pytest.approx(2.5)        # 2 h ended + 2 × 15 min running
    assert spend.committed.gpu_hours == pytest.approx(1.5)    # 2 × 45 min left of their hour
    assert spend.projected.gpu_hours == pytest.approx(3.0)    # 3 pending × 1 h limit
    assert (spend.running, spend.pending, spend.per_task.gpu_hours) == (2, 3, 1.0)


@pytest.mark.parametrize(("limit", "affordable", "exhausted"), [
    (10.0, 6, False),   # 10 - 4 (spent + committed) pays for 6 more at their limit: all 3 fit
    (5.5, 1, False),    # 1.5 left: one more
    (4.9, 0, True),     # 0.9 left: not one more task at its limit → hold
    (3.0, 0, True),     # already over
])
def test_assess_counts_how_many_more_attempts_the_budget_pays(limit: float, affordable: int, exhausted: bool) -> None:
    spend = campaign_spend([group("ended", 2, 2 * 3600, "cpu=2,gres/gpu=1"), group("running", 2, 2 * 900),
                            group("pending", 3)], PRICES)
    a = assess(Budget(gpu_hours=limit), spend)
    assert (a.affordable, a.exhausted) == (affordable, exhausted)


def test_the_dimension_that_binds_most_decides() -> None:
    spend = campaign_spend([group("pending", 4)], PRICES)  # each: 1 GPU-h, 2 CPU-h, 3.2 money
    a = assess(Budget(gpu_hours=100.0, money=7.0), spend)
    assert a.affordable == 2  # money pays for two, GPU-hours for a hundred


def test_guard_warns_once_per_limit() -> None:
    spend = campaign_spend([group("ended", 1, 3 * 3600)], PRICES)
    budget = Budget(gpu_hours=3.5, warn_at=0.8)
    a = assess(budget, spend)
    [alert] = guard(budget, a, [], paused=False, alerted=()).decisions
    assert (alert.rule, alert.action, alert.task_index) == ("budget", "alert", -1)
    assert alert.reason == ("budget warning: gpu_hours 3 spent + 0 committed of 3.5 GPU-h (86%), past the "
                            "warning level of 80%.")
    assert guard(budget, a, [], paused=False, alerted={alert.params["key"]}).decisions == []


def test_guard_admits_only_what_the_budget_pays_for() -> None:
    views = pending_views(5)
    spend = campaign_spend([group("running", 1, 0), group("pending", 5)], PRICES)
    plan = guard(Budget(gpu_hours=4.0), assess(Budget(gpu_hours=4.0), spend), views, paused=False, alerted=())
    assert plan.cap == 1 + 3 and not plan.pause  # 1 running (1 GPU-h committed) + 3 more paid for


def test_guard_holds_every_pending_element_and_pauses_at_the_limit() -> None:
    views = [*pending_views(3), TaskView(9, (AttemptView("u.0", 1, "PENDING", "13_0", ONE_GPU_HOUR),))]
    spend = campaign_spend([group("running", 2, 0), group("pending", 4)], PRICES)
    budget = Budget(gpu_hours=2.5, warn_at=1.0)
    plan = guard(budget, assess(budget, spend), views, paused=False, alerted=())
    [hold] = plan.decisions
    assert plan.pause and hold.action == "hold" and hold.params["arrays"] == {"12": [0, 1, 2], "13": [0]}
    assert "4 pending element(s) are held and the campaign is paused" in hold.reason


def test_a_paused_campaign_is_not_held_again() -> None:
    spend = campaign_spend([group("pending", 4)], PRICES)
    budget = Budget(gpu_hours=0.5, warn_at=1.0)
    assert guard(budget, assess(budget, spend), pending_views(4), paused=True, alerted=()).decisions == []


def test_pending_elements_lists_only_pending_latest_attempts_by_array() -> None:
    views = [*pending_views(2), TaskView(5, (AttemptView("r.5", 1, "RUNNING", "12_5", ONE_GPU_HOUR),))]
    assert pending_elements(views) == {"12": [0, 1]}


def test_a_multi_node_attempt_counts_every_node() -> None:
    # 2 nodes × (1 GPU, 2 processes × 2 CPUs): pending, the whole allocation at its time limit
    two_nodes = replace(ONE_GPU_HOUR, nodes=2, tasks_per_node=2)
    spend = campaign_spend([group("pending", 1, res=two_nodes)], PRICES)
    assert (spend.projected.gpu_hours, spend.projected.cpu_hours) == (2.0, 8.0)
    assert spend.per_task == spend.projected  # what admitting one more such task costs
    # ended: sacct's job line is already the whole allocation (lab cluster, 2 nodes × 2 CPUs)
    ended = campaign_spend([group("ended", 1, 3600, "billing=4,cpu=4,mem=600M,node=2", res=two_nodes)], PRICES)
    assert ended.spent.cpu_hours == 4.0
