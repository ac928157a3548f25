"""`objective:` for any campaign: what results ranks by, report plots and rungs promote by."""

from __future__ import annotations

import pytest

from campaignctl.core.screens.report_series import default_metric
from campaignctl.core.screens.results import objective_of
from campaignctl.core.spec.settings import campaign_settings
from tests.core.test_spec import problems_of, spec_of

PLAIN = "name: t\ncommand: [x, '{lr}']\nmatrix: {lr: [1, 2]}\n"


def test_a_plain_campaign_names_its_objective_for_results_and_report() -> None:
    spec = spec_of(PLAIN + "objective: {metric: valid_loss, goal: min}\n")
    settings = campaign_settings(spec.settings())
    objective = objective_of(settings, spec.policy)
    assert objective is not None and (objective.metric, objective.goal, objective.source) == (
        "valid_loss", "min", "objective")
    assert default_metric(settings, ["ms_batch", "loss", "valid_loss"]) == "valid_loss"
    assert default_metric(campaign_settings(spec_of(PLAIN).settings()), ["ms_batch", "loss"]) == "ms_batch"


def test_a_rung_without_a_metric_promotes_by_the_objective() -> None:
    spec = spec_of(PLAIN + "objective: {metric: acc, goal: max}\n"
                   "rungs: [{params: {steps: 1}, promote: {eta: 2}}, {params: {steps: 4}}]\n")
    promote = spec.rungs[0].promote
    assert promote is not None and (promote.metric, promote.goal) == ("acc", "max")
    assert "metric: is required" in problems_of(PLAIN + "rungs: [{params: {steps: 1}, promote: {eta: 2}}, "
                                                        "{params: {steps: 4}}]\n")


@pytest.mark.parametrize(("line", "fragment"), [
    ("objective: {metric: loss, goal: lowest}", "objective.goal: 'lowest' is not allowed; use one of: min, max"),
    ("objective: {goal: max}", "objective.metric: is required"),
    ("objective: val_loss", "objective: must be a mapping"),
    ("objective: {metric: loss, by: best}", "objective.by: unknown key"),
])
def test_a_bad_objective_names_the_key(line: str, fragment: str) -> None:
    assert fragment in problems_of(PLAIN + line + "\n")
