"""A search in the simulator: a synthetic objective over the spec's space, and what the policy's
tick reads of a simulated search (its trials, how each trial's task ended, each completed
trial's final value). Pure.

The objective is a bowl: 1 plus each sampled parameter's squared distance from a seeded optimum,
measured as a fraction of the parameter's range (on a log scale where the range is), and 0.25
for a categorical choice other than the optimum's. Its best value is 1, so "within 5 %" is a
value of at most 1.05 for any space, and a seed draws another optimum."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from campaignctl.core.decisions.action_records import ActionRecord
from campaignctl.core.decisions.answers import SETTLING
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.model.params import Scalar
from campaignctl.core.sim.scheduler import Job
from campaignctl.core.spec.search_spec import Dimension, SearchSpec
from campaignctl.core.tuning.ladder import TaskEnd, task_ends
from campaignctl.core.tuning.search import COMPLETE, Trial, trials_of

OPTIMUM = 1.0
WRONG_CHOICE = 0.25
# the engine's word for a settled task → the decision that settled it (core/decisions/answers.py: SETTLING)
SETTLED_BY = dict(zip(("given_up", "stopped"), SETTLING, strict=True))


@dataclass(frozen=True, slots=True)
class Bowl:
    search: SearchSpec
    optimum: Mapping[str, Scalar]

    def value(self, params: Mapping[str, Scalar]) -> float:
        return OPTIMUM + sum(_distance(d, params.get(d.name), self.optimum[d.name]) for d in self.search.space)


def bowl(search: SearchSpec, seed: int) -> Bowl:
    """The objective of simulation `seed`: its optimum drawn uniformly over the space (log-uniformly
    on a log scale), away from the range's ends by a tenth of it."""
    rng = random.Random(f"optimum:{seed}")
    optimum: dict[str, Scalar] = {}
    for d in search.space:
        if d.choices:
            optimum[d.name] = rng.choice(d.choices)
            continue
        u = rng.uniform(0.1, 0.9)
        low, high = (math.log(d.low), math.log(d.high)) if d.log else (d.low, d.high)
        x = math.exp(low + u * (high - low)) if d.log else low + u * (high - low)
        optimum[d.name] = round(x) if d.kind == "int" else x
    return Bowl(search, optimum)


def _distance(d: Dimension, value: Scalar | None, best: Scalar) -> float:
    if d.choices:
        return 0.0 if value == best else WRONG_CHOICE
    if not isinstance(value, (int, float)) or not isinstance(best, (int, float)):
        return 1.0
    if d.log:
        return ((math.log(value) - math.log(best)) / (math.log(d.high) - math.log(d.low))) ** 2
    return ((value - best) / (d.high - d.low)) ** 2


@dataclass(slots=True)
class SimSearch:
    """What the simulated search has asked and told so far (the log's asks and tells)."""

    objective: Bowl
    logged: list[tuple[int, ActionRecord]] = field(default_factory=list)

    def trials(self) -> tuple[Trial, ...]:
        return trials_of(self.logged)

    def saw(self, decisions: tuple[Decision, ...]) -> None:
        self.logged += [(d.task_index, d.typed) for d in decisions
                        if d.mode == "enforce" and not d.gate and d.action in ("ask", "tell")]

    def ends(self, jobs: list[list[Job]], settled: Mapping[int, str]) -> dict[int, TaskEnd]:
        """Every started trial's latest attempt, and what settled it."""
        latest = [(task, attempts[-1]) for task, attempts in enumerate(jobs) if attempts]
        answers = {job.token: SETTLED_BY[settled[task]] for task, job in latest if settled.get(task) in SETTLED_BY}
        return task_ends(((task, job.token, job.state, "") for task, job in latest), answers)

    def curves(self, jobs: list[list[Job]]) -> dict[int, tuple[tuple[int, float], ...]]:
        """Each completed trial's metric: its one final point, the objective at its params."""
        return {task: ((1, self.objective.value(attempts[-1].params)),)
                for task, attempts in enumerate(jobs) if attempts and attempts[-1].state == "COMPLETED"}


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """How a simulated search went: its best value, and after how many told trials it came
    within 5 % of the optimum (None: never)."""

    trials: int
    best: float | None
    within_5pct_after: int | None

    def to_dict(self) -> dict[str, object]:
        return {"trials": self.trials, "best": self.best, "within_5pct_after": self.within_5pct_after,
                "optimum": OPTIMUM}


def outcome(trials: tuple[Trial, ...], within: float = 1.05) -> SearchOutcome:
    """`within_5pct_after`: the number of trials asked up to the first one within `within` of the optimum."""
    done = [t for t in trials if t.state == COMPLETE and t.value is not None]
    reached = next((t.number + 1 for t in done if t.value is not None and t.value <= OPTIMUM * within), None)
    return SearchOutcome(len(trials), min(t.value for t in done if t.value is not None) if done else None, reached)
