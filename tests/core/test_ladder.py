"""Progressive campaigns: rungs in the spec, and who is promoted when (pure tables)."""

from __future__ import annotations

from typing import Any

import pytest

from campaignctl.core.base.errors import SpecError
from campaignctl.core.base.rawdoc import RawDoc
from campaignctl.core.decisions.action_records import Hold
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.settings import CampaignSettings, campaign_settings
from campaignctl.core.spec.spec import Budget, CampaignSpec, validate_spec
from campaignctl.core.tick.budget import assess
from campaignctl.core.tuning.ladder import (
    TaskEnd,
    ladder_state,
    promotion_block,
    promotion_cost,
    promotion_decisions,
    rung_of,
)
from campaignctl.core.usage.cost import Amount, Spend

SPEC = {
    "name": "sh", "command": ["python", "train.py", "--lr", "{lr}", "--steps", "{steps}", "--frac", "{frac}"],
    "matrix": {"lr": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]},
    "resources": {"gpus": 1, "time": "00:10:00", "mem": "500M"},
    "rungs": [
        {"name": "screen", "params": {"steps": 10, "frac": 0.25}, "promote": {"metric": "loss", "eta": 3}},
        {"name": "grow", "params": {"steps": 30}, "resources": {"time": "00:30:00"},
         "promote": {"metric": "loss", "goal": "min", "threshold": 0.5}},
        {"name": "full", "params": {"steps": 90, "frac": 1.0}, "resources": {"gpus": 2}},
    ],
}


def spec(**changes: Any) -> CampaignSpec:
    return validate_spec(RawDoc("spec.yaml", {**SPEC, **changes}), "/work")


def problems(**changes: Any) -> str:
    with pytest.raises(SpecError) as exc:
        spec(**changes)
    return "\n".join(exc.value.problems)


def test_tasks_are_configs_times_rungs_with_cumulative_params_and_resources() -> None:
    s = spec()
    assert s.configs == 9 and len(s.tasks) == 27 and s.first_tasks() == list(range(9))
    t = s.tasks[2 * 9 + 4]  # config 4 in rung 2
    assert (t.rung, t.config) == (2, 4)
    assert t.argv == ("python", "train.py", "--lr", "0.5", "--steps", "90", "--frac", "1.0")
    assert s.tasks[9 + 4].argv[-3:] == ("30", "--frac", "0.25")  # frac inherited from rung 0
    assert [s.resources_of(i).gpus for i in (0, 9, 18)] == [1, 1, 2]
    assert [s.resources_of(i).time_min for i in (0, 9, 18)] == [10, 30, 30]
    settings = s.settings()
    assert settings["configs"] == 9 and [r["name"] for r in settings["rungs"]] == ["screen", "grow", "full"]
    assert rung_of(20, campaign_settings(settings)) == 2


def test_rung_mistakes_name_the_key() -> None:
    assert "rungs[0].params.lr: lr is a parameter of the configs" in problems(rungs=[
        {"params": {"lr": 1}, "promote": {"metric": "loss", "eta": 2}}, {"params": {"steps": 1, "frac": 1}}])
    text = problems(rungs=[{"params": {"steps": 1, "frac": 1}}, {"promote": {"metric": "loss", "eta": 2}}])
    assert "rungs[0].promote: is required on every rung but the last" in text
    assert "rungs[1].promote: the last rung has no rung to promote into" in text
    assert "set exactly one of eta" in problems(rungs=[
        {"params": {"steps": 1, "frac": 1}, "promote": {"metric": "loss", "eta": 2, "threshold": 1}}, {}])
    assert "{steps} is not a parameter of every task" in problems(rungs=[
        {"params": {"frac": 1}, "promote": {"metric": "loss", "eta": 2}}, {"params": {"steps": 5}}])
    assert "unknown key" in problems(rungs=[
        {"params": {"steps": 1, "frac": 1}, "resources": {"exclusive": True},
         "promote": {"metric": "loss", "eta": 2}}, {}])


def ends(settings: CampaignSettings, states: dict[int, str],
         answers: dict[int, str] | None = None) -> dict[int, TaskEnd]:
    return {i: TaskEnd(i, f"tok.{i}", state, (answers or {}).get(i, "")) for i, state in states.items()}


LOSS = {0: 0.9, 1: 0.3, 2: 0.8, 3: 0.1, 4: 0.7, 5: 0.3, 6: 0.6, 7: 0.2, 8: 0.95}


def curves(values: dict[int, float], offset: int = 0) -> dict[int, tuple[tuple[int, float], ...]]:
    return {offset + c: ((1, 2.0), (10, v)) for c, v in values.items()}  # the final value ranks


def test_rung_0_promotes_the_best_third_by_final_value_once_every_task_settled() -> None:
    settings = campaign_settings(spec().settings())
    done = dict.fromkeys(range(9), "COMPLETED")
    waiting = ladder_state(settings, ends(settings, {**done, 4: "RUNNING"}), curves(LOSS), set())
    assert waiting.plan is None and waiting.waiting == 1 and not waiting.complete
    state = ladder_state(settings, ends(settings, done), curves(LOSS), set())
    assert state.plan is not None
    assert state.plan.survivors == (3, 7, 1)  # 0.1, 0.2, then the tie 0.3 goes to config 1 (not 5)
    decisions = promotion_decisions(state.plan, settings)
    promoted = [d for d in decisions if d.action == "promote"]
    assert [d.task_index for d in promoted] == [10, 12, 16]  # rung 1 tasks of configs 1, 3, 7
    assert all(d.resources is not None and d.resources.time_min == 30 for d in promoted)
    d3 = next(d for d in promoted if d.params["config"] == 3)
    assert d3.inputs["rank"] == 1 and d3.inputs["value"] == 0.1 and d3.inputs["ranking"]["8"] == 0.95
    assert "loss 0.1 ranks 1 of 9 in rung screen; kept by best 1/3 by loss (min): promoted to rung grow" in d3.reason
    retired = {d.params["config"] for d in decisions if d.action == "retire"}
    assert retired == {0, 2, 4, 5, 6, 8}
    assert ladder_state(settings, ends(settings, done), curves(LOSS), {0}).plan is None  # decided: never twice


def test_stopped_failed_and_silent_configs_are_never_promoted() -> None:
    settings = campaign_settings(spec().settings())
    states = {**dict.fromkeys(range(9), "COMPLETED"), 3: "CANCELLED", 7: "FAILED"}
    values = {c: v for c, v in LOSS.items() if c != 1}  # config 1 reported no loss
    unsettled = ladder_state(settings, ends(settings, states), curves(values), set())
    assert unsettled.plan is None  # a FAILED/CANCELLED attempt nobody answered yet may be retried
    state = ladder_state(settings, ends(settings, states, {3: "stop", 7: "give_up"}), curves(values), set())
    assert state.plan is not None and state.plan.survivors == (5, 6, 4)
    why = {s.config: s.why_not for s in state.plan.standings}
    assert why[3] == "stopped early" and why[7] == "ended FAILED" and why[1] == "reported no loss"


def test_a_threshold_keeps_everyone_good_enough_and_max_goal_ranks_high_first() -> None:
    settings = campaign_settings(spec().settings())
    rung1 = dict.fromkeys(range(9, 12), "COMPLETED")
    state = ladder_state(settings, ends(settings, {**dict.fromkeys(range(9), "COMPLETED"), **rung1}),
                         curves({0: 0.5, 1: 0.51, 2: 0.2}, offset=9), {0})
    assert state.rung == 1 and state.plan is not None and state.plan.survivors == (2, 0)  # 0.5 is good enough
    rungs = [{**SPEC["rungs"][0], "promote": {"metric": "acc", "goal": "max", "eta": 2}}, SPEC["rungs"][2]]
    settings = campaign_settings(spec(rungs=rungs).settings())
    state = ladder_state(settings, ends(settings, dict.fromkeys(range(9), "COMPLETED")), curves(LOSS), set())
    assert state.plan is not None and state.plan.survivors == (8, 0, 2, 4)  # floor(9/2) = 4, highest first


def test_by_best_ranks_a_config_by_its_best_value_in_the_rung_not_where_it_ended() -> None:
    # config 0 dipped to 0.05 then diverged to 0.9; config 1 ended on its best, 0.2
    diverged = {0: ((1, 0.5), (5, 0.05), (10, 0.9)), 1: ((1, 0.6), (10, 0.2)), 2: ((1, 0.7), (10, 0.4))}
    rung0 = {**SPEC["rungs"][0], "promote": {"metric": "loss", "eta": 3}}
    by_last = campaign_settings(spec(matrix={"lr": [0.1, 0.2, 0.3]}, rungs=[rung0, SPEC["rungs"][2]]).settings())
    done = dict.fromkeys(range(3), "COMPLETED")
    state = ladder_state(by_last, ends(by_last, done), diverged, set())
    assert state.plan is not None and state.plan.survivors == (1,)
    best = {**rung0, "promote": {"metric": "loss", "eta": 3, "by": "best"}}
    by_best = campaign_settings(spec(matrix={"lr": [0.1, 0.2, 0.3]}, rungs=[best, SPEC["rungs"][2]]).settings())
    state = ladder_state(by_best, ends(by_best, done), diverged, set())
    assert state.plan is not None and state.plan.survivors == (0,)
    [kept] = [d for d in promotion_decisions(state.plan, by_best) if d.action == "promote"]
    assert kept.inputs["by"] == "best" and kept.inputs["value"] == 0.05
    assert "config 0: best loss 0.05 ranks 1 of 3 in rung screen; kept by best 1/3 by best loss (min)" in kept.reason
    assert "rungs[0].promote.by: 'mean' is not allowed; use one of: last, best" in problems(
        rungs=[{**rung0, "promote": {"metric": "loss", "eta": 3, "by": "mean"}}, SPEC["rungs"][2]])


def test_the_last_rung_or_nobody_promoted_completes_the_ladder() -> None:
    settings = campaign_settings(spec().settings())
    all_done = dict.fromkeys([*range(9), 12, 16], "COMPLETED")
    assert not ladder_state(settings, ends(settings, all_done), {}, {0}).complete
    assert ladder_state(settings, ends(settings, {**all_done, 21: "COMPLETED"}), {}, {0, 1}).complete
    assert ladder_state(settings, ends(settings, all_done), {}, {0, 1}).complete  # rung 1 kept nobody


def test_the_budget_gates_promotion_by_the_next_rungs_projected_cost() -> None:
    settings = campaign_settings(spec().settings())
    state = ladder_state(settings, ends(settings, dict.fromkeys(range(9), "COMPLETED")), curves(LOSS), set())
    assert state.plan is not None
    cost = promotion_cost(state.plan, settings, Prices())
    assert cost.gpu_hours == pytest.approx(3 * 1 * 0.5)  # 3 survivors × 1 GPU × 30 min
    spent = Spend(Amount(gpu_hours=1.0), Amount(), Amount(), 0, 0, Amount())
    assert promotion_block(state.plan, cost, assess(Budget(gpu_hours=2.5), spent)) is None
    block = promotion_block(state.plan, cost, assess(Budget(gpu_hours=2.4), spent))
    assert block is not None and block.action == "hold" and block.typed == Hold()  # no element to hold: a pause
    assert "would cost up to 1.5 GPU-h but only 1.4 of 2.4 remains" in block.reason
