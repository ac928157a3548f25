"""`budget: {energy_kwh: …}` as a table: spent is the attempts' measured energy, committed and
projected follow the campaign's measured energy per attempt-hour; the guard holds at the limit."""

from __future__ import annotations

import pytest

from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.spec import Budget, Resources, validate_spec
from campaignctl.core.tick.budget import assess, guard
from campaignctl.core.usage.cost import UsageGroup, campaign_spend

PRICES = Prices(gpu_hour={"default": 2.0}, cpu_hour=0.1)
TWO_GPUS_2H = Resources(gpus=2, cpus_per_task=2, time_min=120)


def pending_views(n: int) -> list[TaskView]:
    return [TaskView(i, (AttemptView(f"t.{i}", 1, "PENDING", f"12_{i}", TWO_GPUS_2H),)) for i in range(n)]


def test_spent_is_measured_and_pending_work_is_forecast_at_the_measured_rate() -> None:
    # One ended attempt: 1 h at 250 W + 300 W = 1,980,000 J = 0.55 kWh, i.e. 0.55 kW per attempt-hour.
    # One running for 30 min: 990,000 J so far (0.275 kWh); the rate over 1.5 attempt-hours is
    # (0.55 + 0.275) / 1.5 = 0.55 kW. Committed: 1.5 h left of its 2 h limit × 0.55 = 0.825 kWh.
    # Three pending at 2 h: 3 × 2 × 0.55 = 3.3 kWh projected; one more costs 1.1 kWh.
    spend = campaign_spend([UsageGroup("ended", TWO_GPUS_2H, "", 1, 3600, 1_980_000.0),
                            UsageGroup("running", TWO_GPUS_2H, "", 1, 1800, 990_000.0),
                            UsageGroup("pending", TWO_GPUS_2H, "", 3, 0)], PRICES)
    assert spend.spent.energy_kwh == pytest.approx(0.825)
    assert spend.committed.energy_kwh == pytest.approx(0.825)
    assert spend.projected.energy_kwh == pytest.approx(3.3)
    assert spend.per_task.energy_kwh == pytest.approx(1.1)
    assert spend.spent.gpu_hours == pytest.approx(3.0)  # the other dimensions are unchanged


def test_no_measured_energy_forecasts_nothing() -> None:
    spend = campaign_spend([UsageGroup("ended", TWO_GPUS_2H, "", 2, 7200),
                            UsageGroup("pending", TWO_GPUS_2H, "", 3, 0)], PRICES)
    assert (spend.spent.energy_kwh, spend.projected.energy_kwh, spend.per_task.energy_kwh) == (0.0, 0.0, 0.0)
    assessment = assess(Budget(energy_kwh=1.0), spend)
    assert not assessment.exhausted and assessment.affordable is None


def test_attempts_past_the_energy_budget_hold_the_remaining_work() -> None:
    # Two ended attempts used 0.6 kWh each (2,160,000 J): 1.2 kWh spent of a 1.0 kWh budget.
    budget = Budget(energy_kwh=1.0, warn_at=1.0)
    spend = campaign_spend([UsageGroup("ended", TWO_GPUS_2H, "", 2, 7200, 4_320_000.0),
                            UsageGroup("pending", TWO_GPUS_2H, "", 3, 0)], PRICES)
    plan = guard(budget, assess(budget, spend), pending_views(3), paused=False, alerted=())
    [alert, hold] = plan.decisions  # the warning level (100 %) was passed too
    assert alert.action == "alert" and alert.params["key"] == "warn:energy_kwh:1"
    assert plan.pause and hold.action == "hold" and hold.params["arrays"] == {"12": [0, 1, 2]}
    assert hold.reason.startswith("budget reached: energy_kwh 1.2 spent + 0 committed of 1 kWh (120%)")


def test_the_energy_budget_admits_only_what_the_measured_rate_pays_for() -> None:
    # 0.5 kW measured (1 attempt-hour, 1,800,000 J = 0.5 kWh); a 2 h attempt costs 1 kWh;
    # 3.6 kWh budget − 0.5 spent = 3.1 left → 3 more attempts, not all 5.
    budget = Budget(energy_kwh=3.6)
    spend = campaign_spend([UsageGroup("ended", TWO_GPUS_2H, "", 1, 3600, 1_800_000.0),
                            UsageGroup("pending", TWO_GPUS_2H, "", 5, 0)], PRICES)
    plan = guard(budget, assess(budget, spend), pending_views(5), paused=False, alerted=())
    assert plan.cap == 3 and not plan.pause


def test_the_spec_takes_an_energy_budget_and_refuses_a_negative_one() -> None:
    head = "name: t\ncommand: [echo]\nresources: {gpus: 1}\n"
    spec = validate_spec(parse_yaml(head + "budget: {energy_kwh: 2.5}\n", "s.yaml"), "/p")
    assert spec.budget.limits() == {"energy_kwh": 2.5} and spec.settings()["budget"]["energy_kwh"] == 2.5  # type: ignore[index]
    with pytest.raises(SpecError, match=r"budget\.energy_kwh"):
        validate_spec(parse_yaml(head + "budget: {energy_kwh: -1}\n", "s.yaml"), "/p")
