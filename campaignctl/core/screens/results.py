"""Which config won: one row per config (a point of the matrix, across rungs) with its final and
best value of one metric, ranked by the objective's direction, and what it used. Pure.

A progressive campaign runs config c of rung r as task r × configs + c (core/tuning/ladder.py): a config's
row shows the highest rung it reached, the parameters it ran there, its final value there and the
best value it reported in any rung. Without rungs a config is a task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace

from campaignctl.core.model.params import Scalar
from campaignctl.core.model.training_metrics import Curve, final_value
from campaignctl.core.policy.policy import Policy
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.tuning.ladder import rung_names
from campaignctl.core.usage.efficiency import AttemptUse, Efficiency, task_efficiency

BY = ("last", "best")


@dataclass(frozen=True, slots=True)
class Objective:
    metric: str
    goal: str  # min | max
    source: str  # where it was read: the spec key, or what the user gave


def objective_of(settings: CampaignSettings, policy: Policy) -> Objective | None:
    """The metric the campaign optimises: its `objective:`, else what its rungs promote by, else what early stopping
    watches; None when the spec names neither."""
    if settings.objective:
        return Objective(settings.objective.metric, settings.objective.goal, "objective")
    for rung in settings.rungs:
        if rung.promote is not None and rung.promote.metric:
            return Objective(rung.promote.metric, rung.promote.goal or "min", f"rungs[{rung.number}].promote")
    stopping = policy.early_stopping
    if stopping.metric:
        return Objective(stopping.metric, stopping.goal, "policy.early_stopping")
    return None


@dataclass(frozen=True, slots=True)
class ConfigResult:
    config: int
    task: int  # the task of the highest rung it reached
    params: Mapping[str, Scalar]
    rung: str  # that rung's name ("" without rungs)
    state: str  # its latest attempt's, as the last tick saw it (or NOT_SUBMITTED, NOT_PROMOTED)
    attempts: int  # over every rung
    final: float | None
    best: float | None
    efficiency: Efficiency
    rank: int | None = None  # 1 = the winner; None: no value to rank by
    shared: str = ""  # `12_0 ×4`: its latest attempt ran packed, in that element with 3 other tasks
    cluster: str = ""  # `clusters:`: where its latest attempt was submitted


@dataclass(frozen=True, slots=True)
class TaskFacts:
    """What the store says of one task: its state (or label), attempts, and what each used."""

    state: str
    attempts: int
    uses: Sequence[AttemptUse] = ()
    shared: str = ""  # as ConfigResult's
    cluster: str = ""  # as ConfigResult's


def config_results(settings: CampaignSettings, params: Mapping[int, Mapping[str, Scalar]],
                   tasks: Mapping[int, TaskFacts], curves: Mapping[int, Curve], goal: str, by: str,
                   prices: Prices, of: Callable[[AttemptUse], Efficiency] | None = None) -> list[ConfigResult]:
    """Every config, the winner first: ranked by its final (`by` last) or best value in the goal's
    direction; configs without a value last, in config order. `of`: each attempt's efficiency
    (core/usage/efficiency.memo, shared with the campaign's figure)."""
    configs = settings.configs or len(params)
    names = rung_names(settings)
    rows = []
    for config in range(configs):
        chain = list(range(config, len(params), configs)) if settings.configs else [config]
        reached = max((t for t in chain if tasks.get(t, TaskFacts("", 0)).attempts), default=chain[0])
        facts = tasks.get(reached, TaskFacts("NOT_SUBMITTED", 0))
        values = [v for t in chain for _, v in curves.get(t, ())]
        rows.append(ConfigResult(
            config, reached, params.get(reached, {}), names[chain.index(reached)],
            facts.state, sum(tasks.get(t, TaskFacts("", 0)).attempts for t in chain),
            final_value(curves.get(reached, ())), (min(values) if goal == "min" else max(values)) if values else None,
            task_efficiency([u for t in chain for u in tasks.get(t, TaskFacts("", 0)).uses], prices, of),
            shared=facts.shared, cluster=facts.cluster))
    return _ranked(rows, goal, by)


def _ranked(rows: list[ConfigResult], goal: str, by: str) -> list[ConfigResult]:
    def value(row: ConfigResult) -> float | None:
        return row.best if by == "best" else row.final

    known = sorted((r for r in rows if value(r) is not None),
                   key=lambda r: ((value(r) or 0.0) if goal == "min" else -(value(r) or 0.0), r.config))
    return [replace(r, rank=n) for n, r in enumerate(known, 1)] + [r for r in rows if value(r) is None]


FIXED = ("rank", "config", "rung", "state", "attempts", "metric", "final", "best", "shared", "cluster")
# flat names of the efficiency figures: `time` or `mem` alone would read as a param
FLAT = {"cpu": "cpu_eff", "mem": "mem_eff", "time": "time_eff", "gpu_mem": "gpu_mem_eff"}


def param_column(name: str) -> str:
    """A param's column: its name, or `param.NAME` where a fixed column has that name."""
    return f"param.{name}" if name in FIXED or name in _FIGURES else name


_FIGURES = frozenset(FLAT.get(f.name, f.name) for f in fields(Efficiency))


def plain_row(row: ConfigResult, metric: str | None) -> dict[str, object]:
    """One flat row (pandas-ready): rank, config, the params as columns, rung, state, the metric's
    final and best values, then the efficiency figures (fractions of what Slurm allocated). A
    param named like a fixed column keeps its value as `param.NAME`."""
    figures = {FLAT.get(k, k): v for k, v in row.efficiency.to_dict().items()}
    params = {param_column(k): v for k, v in row.params.items()}
    return {"rank": row.rank, "config": row.config, **params, "rung": row.rung, "state": row.state,
            "attempts": row.attempts, "metric": metric, "final": row.final, "best": row.best, **figures,
            "shared": row.shared or None, **({"cluster": row.cluster} if row.cluster else {})}
