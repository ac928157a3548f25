"""`search:`: the space, the sampler and the trials a spec asks for, and what it refuses."""

from __future__ import annotations

import pytest

from campaignctl.core.spec.search_spec import Dimension, search_from_settings
from campaignctl.core.spec.settings import campaign_settings
from tests.core.test_spec import problems_of, spec_of

SEARCH = """\
name: tune
command: [python, train.py, --lr, "{lr}", --width, "{width}", --opt, "{opt}", --epochs, "{epochs}"]
resources: {gpus: 1, mem: 4G, time: "00:30:00"}
search:
  sampler: tpe
  metric: val_loss
  trials: 24
  parallel: 4
  seed: 7
  space:
    lr: {loguniform: [1.0e-5, 1.0e-1]}
    width: {int: [16, 256], step: 16}
    opt: {categorical: [adam, sgd]}
    epochs: 3
"""


def test_a_search_is_its_trials_with_the_fixed_params_and_its_metric_is_the_objective() -> None:
    spec = spec_of(SEARCH)
    assert spec.search is not None and len(spec.tasks) == 24
    assert [d.name for d in spec.search.space] == ["lr", "width", "opt"]
    assert spec.search.space[0] == Dimension("lr", "loguniform", 1e-5, 1e-1, log=True)
    assert spec.search.space[1].step == 16 and spec.search.space[2].choices == ("adam", "sgd")
    assert all(dict(t.params) == {"epochs": 3} for t in spec.tasks)  # unasked: the fixed values only
    assert spec.first_tasks() == []  # the first tick asks for the first trials
    assert spec.objective is not None and (spec.objective.metric, spec.objective.goal) == ("val_loss", "min")
    settings = campaign_settings(spec.settings())
    assert settings.search == spec.search and settings.tasks == 24
    assert settings.search_resources is not None and settings.search_resources.mem_mb == 4096
    assert search_from_settings(spec.search.to_settings()) == spec.search


@pytest.mark.parametrize(("change", "says"), [
    ("    lr: {loguniform: [0.0, 1.0e-1]}", "a log scale needs low above 0"),
    ("    lr: {uniform: [0.5, 0.1]}", "low must be below high"),
    ("    lr: {uniform: [0.1]}", "must be [low, high], two numbers"),
    ("    lr: {int: [0, " + "1" + "0" * 400 + "]}", "two numbers within ±9,007,199,254,740,992"),  # was exit 1
    ("    lr: {uniform: [-1.0e308, 1.0e308]}", "two numbers within ±"),
    ("    lr: {normal: [0, 1]}", "give exactly one of uniform, loguniform, int, categorical"),
    ("    lr: {categorical: [a, a]}", "lists a value twice"),
    ("    lr: {int: [1.5, 4]}", "two whole numbers"),
    ("    lr: {int: [1, 64], log: true, step: 2}", "a step and a log scale do not combine"),
    ("    lr: {uniform: [0, 1], step: 2}", "unknown key for a uniform parameter"),
])
def test_a_bad_dimension_is_refused_naming_its_key(change: str, says: str) -> None:
    text = SEARCH.replace("    lr: {loguniform: [1.0e-5, 1.0e-1]}", change)
    message = problems_of(text)
    assert "search.space.lr" in message and says in message


@pytest.mark.parametrize(("text", "where", "says"), [
    (SEARCH.replace("  sampler: tpe", "  sampler: grid"), "search.sampler", "use one of: random, tpe, qmc, cmaes"),
    (SEARCH.replace("  trials: 24\n", ""), "search.trials", "is required"),
    (SEARCH.replace("  seed: 7\n", "  seed: 7\n  promotion: eager\n"), "search.promotion", "use one of: async, sync"),
    (SEARCH.replace("  metric: val_loss\n", ""), "search.metric", "is required (or `objective:`)"),
    (SEARCH + "matrix: {lr: [0.1]}\n", "matrix", "give `search:` or `matrix:`, not both"),
    (SEARCH + "objective: {metric: acc, goal: max}\n", "search.metric", "`objective:` says max acc"),
    (SEARCH + "rungs: [{name: a, params: {epochs: 1}, promote: {threshold: 0.5}}, {name: b}]\n",
     "rungs[0].promote.threshold", "promote the best 1/eta of the trials so far"),
    (SEARCH + "rungs: [{name: a, params: {lr: 0.1}, promote: {eta: 3}}, {name: b}]\n", "rungs[0].params.lr",
     "lr is a parameter of the configs"),
    (SEARCH.replace("--epochs", "--seed").replace("{epochs}", "{seed}"), "command", "{seed} is not a parameter"),
])
def test_what_search_refuses(text: str, where: str, says: str) -> None:
    message = problems_of(text)
    assert where in message and says in message, message


def test_a_search_with_rungs_has_a_task_per_trial_and_rung_the_rung_params_over_the_fixed_ones() -> None:
    spec = spec_of(SEARCH + "rungs: [{name: screen, params: {epochs: 1}, promote: {eta: 3}},"
                            " {name: full, resources: {gpus: 2}}]\n")
    assert len(spec.tasks) == 48 and spec.configs == 24
    assert dict(spec.tasks[0].params) == {"epochs": 1} and dict(spec.tasks[24].params) == {"epochs": 1}
    assert spec.tasks[24].rung == 1 and spec.tasks[24].config == 0
    assert spec.rungs[0].promote is not None and spec.rungs[0].promote.metric == "val_loss"  # the search's
    settings = campaign_settings(spec.settings())
    assert settings.search_resources is not None and settings.search_resources.gpus == 1  # rung 0's


def test_the_objective_names_the_metric_a_search_leaves_out() -> None:
    spec = spec_of(SEARCH.replace("  metric: val_loss\n", "") + "objective: {metric: acc, goal: max}\n")
    assert spec.search is not None and (spec.search.metric, spec.search.goal) == ("acc", "max")
