"""One row per config: a progressive campaign's configs across rungs, ranked by last or best value."""

from __future__ import annotations

import pytest

from campaignctl.core.policy.policy import Policy
from campaignctl.core.policy.policy_sections import EarlyStopping, Prices
from campaignctl.core.screens.results import Objective, TaskFacts, config_results, objective_of, plain_row
from campaignctl.core.spec.settings import CampaignSettings, campaign_settings
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.efficiency import AttemptUse

# 3 configs × 2 rungs: tasks 0-2 screen, 3-5 full (core/tuning/ladder.py numbering)
SETTINGS = campaign_settings({"configs": 3, "rungs": [
    {"name": "screen", "params": {"steps": 2}, "resources": {}, "promote": {"metric": "loss", "goal": "min", "eta": 2}},
    {"name": "full", "params": {"steps": 4}, "resources": {}, "promote": None}]})
PARAMS = {t: {"lr": [0.1, 0.01, 0.001][t % 3], "steps": 2 if t < 3 else 4} for t in range(6)}
CURVES = {0: ((1, 0.9), (2, 0.5)), 3: ((3, 0.6), (4, 0.4)),  # config 0: promoted, finished at 0.4
          1: ((1, 0.8), (2, 0.7)),  # config 1: not promoted
          2: ((1, 0.3), (2, 0.45)), 5: ((3, 0.5),)}  # config 2: promoted, running; its best was in screen
RAN = AttemptUse("COMPLETED", 600, Resources(gpus=1, time_min=20))
TASKS = {0: TaskFacts("COMPLETED", 1, (RAN,)), 1: TaskFacts("COMPLETED", 1, (RAN,)),
         2: TaskFacts("COMPLETED", 1, (RAN,)), 3: TaskFacts("COMPLETED", 2, (RAN, RAN)),
         4: TaskFacts("NOT_PROMOTED", 0), 5: TaskFacts("RUNNING", 1, (AttemptUse("RUNNING", 300, RAN.resources),))}


def test_each_config_shows_the_highest_rung_it_reached_and_its_values_there() -> None:
    rows = {r.config: r for r in config_results(SETTINGS, PARAMS, TASKS, CURVES, "min", "last", Prices())}
    assert [(rows[c].rung, rows[c].state, rows[c].task, rows[c].attempts) for c in range(3)] == [
        ("full", "COMPLETED", 3, 3), ("screen", "COMPLETED", 1, 1), ("full", "RUNNING", 5, 2)]
    assert [(rows[c].final, rows[c].best) for c in range(3)] == [(0.4, 0.4), (0.7, 0.7), (0.5, 0.3)]
    assert rows[0].params == {"lr": 0.1, "steps": 4}  # what it ran at the rung it reached
    assert rows[0].efficiency.gpu_hours == pytest.approx(3 * 600 / 3600)  # every attempt of every rung
    assert rows[2].efficiency.time == pytest.approx(300 / 1200)  # its latest attempt, still running


@pytest.mark.parametrize(("goal", "by", "order"), [
    ("min", "last", [0, 2, 1]), ("min", "best", [2, 0, 1]),
    ("max", "last", [1, 2, 0]), ("max", "best", [0, 1, 2])])  # max best: 0.9, 0.8, 0.5
def test_ranked_by_last_or_best_in_the_goals_direction(goal: str, by: str, order: list[int]) -> None:
    rows = config_results(SETTINGS, PARAMS, TASKS, CURVES, goal, by, Prices())
    assert [r.config for r in rows] == order and [r.rank for r in rows] == [1, 2, 3]


def test_configs_without_a_value_come_last_unranked() -> None:
    params = {0: {"lr": 0.1}, 1: {"lr": 0.2}, 2: {"lr": 0.3}}
    rows = config_results(CampaignSettings(), params, {0: TaskFacts("PENDING", 1), 1: TaskFacts("COMPLETED", 1)},
                          {1: ((5, 2.0),)}, "min", "last", Prices())
    assert [(r.config, r.rank, r.state, r.rung) for r in rows] == [
        (1, 1, "COMPLETED", ""), (0, None, "PENDING", ""), (2, None, "NOT_SUBMITTED", "")]
    assert rows[1].efficiency.time is None  # pending: not 0 %


def test_the_objective_is_what_the_rungs_promote_by_else_what_early_stopping_watches() -> None:
    assert objective_of(SETTINGS, Policy()) == Objective("loss", "min", "rungs[0].promote")
    watching = Policy(early_stopping=EarlyStopping(metric="acc", goal="max"))
    assert objective_of(CampaignSettings(), watching) == Objective("acc", "max", "policy.early_stopping")
    assert objective_of(CampaignSettings(), Policy()) is None


def test_a_plain_row_keeps_params_apart_from_the_fixed_columns() -> None:
    [row, *_] = config_results(CampaignSettings(), {0: {"state": "x", "time": 3, "lr": 0.1}},
                               {0: TaskFacts("COMPLETED", 1, (RAN,))}, {0: ((1, 0.5),)}, "min", "last", Prices())
    plain = plain_row(row, "loss")
    assert plain["state"] == "COMPLETED" and plain["param.state"] == "x" and plain["time"] == 3
    assert plain["time_eff"] == pytest.approx(0.5) and plain["lr"] == 0.1 and plain["metric"] == "loss"
    assert list(plain)[:5] == ["rank", "config", "param.state", "time", "lr"]
