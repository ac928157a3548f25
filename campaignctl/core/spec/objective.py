"""`objective: {metric: NAME, goal: min|max}`: the metric a campaign optimises, for any campaign.
`results` ranks by it, `report` plots it, and a rung's `promote:` that names no metric promotes by
it. Without the key, the objective is what the rungs promote by, else what early stopping watches
(core/screens/results.objective_of)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from campaignctl.core.base.reader import Reader
from campaignctl.core.model.training_metrics import METRIC_NAME

OBJECTIVE_KEYS = ("metric", "goal")
GOALS = ("min", "max")


@dataclass(frozen=True, slots=True)
class ObjectiveSpec:
    metric: str
    goal: str = "min"

    def to_settings(self) -> dict[str, str]:
        return {"metric": self.metric, "goal": self.goal}


def read_objective(r: Reader) -> ObjectiveSpec | None:
    if r.get(("objective",)) in (Reader.MISSING, None):
        return None
    if r.mapping(("objective",), OBJECTIVE_KEYS) is None:
        return None
    metric = r.pattern(("objective", "metric"), METRIC_NAME,
                       "the name of a metric the tasks report, e.g. val_loss", required=True)
    goal = r.choice(("objective", "goal"), GOALS) or "min"
    return ObjectiveSpec(metric, goal) if metric else None


def objective_from_settings(value: Any) -> ObjectiveSpec | None:
    if not isinstance(value, dict) or not value.get("metric"):
        return None
    return ObjectiveSpec(str(value["metric"]), str(value.get("goal") or "min"))
