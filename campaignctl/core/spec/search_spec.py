"""The spec's `search:` key: trials a sampler asks for, one at a time, instead of a fixed grid.

    search:
      sampler: tpe            # random | tpe | qmc (Sobol) | cmaes; a grid stays `matrix:`
      metric: val_loss        # what each trial is told: its final value (default: `objective:`)
      goal: min
      trials: 24              # how many trials in all
      parallel: 4             # how many run at once
      ahead: 4                # trials queued behind running ones (afterany), so a slot never waits for a tick
      seed: 1                 # the same seed and the same told trials ask the same next trials
      promotion: async        # with rungs: async (ASHA, core/tuning/asha.py) or sync (once every trial settled)
      space:
        lr: {loguniform: [1.0e-5, 1.0e-1]}
        width: {int: [16, 256], log: true}     # or {int: [16, 256], step: 16}
        dropout: {uniform: [0.0, 0.5]}
        optimizer: {categorical: [adam, sgd]}
        epochs: 3                              # a fixed value beside them

A search's tasks are its trials: trial k is task k, its params the fixed values and, once the
tick asks for it, the sampled ones. Pure: the sampler itself lives in adapters/optuna_sampler.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader
from campaignctl.core.base.safety import IDENTIFIER
from campaignctl.core.model.params import MAX_TASKS, SCALAR_TYPES, Scalar, Trials
from campaignctl.core.model.training_metrics import METRIC_NAME

SEARCH_KEYS = ("sampler", "metric", "goal", "trials", "parallel", "ahead", "seed", "space", "promotion")
PROMOTIONS = ("async", "sync")  # with rungs: as soon as a trial ranks (ASHA), or once every trial settled
SAMPLERS = ("random", "tpe", "qmc", "cmaes")
KINDS = ("uniform", "loguniform", "int", "categorical")
MAX_BOUND = 2**53  # the largest whole number every float between it and 0 holds exactly
RANGE_KEYS = {"uniform": (), "loguniform": (), "int": ("log", "step"), "categorical": ()}
DEFAULT_PARALLEL = 4


@dataclass(frozen=True, slots=True)
class Dimension:
    """One sampled parameter: a range (`low`..`high`, on a log scale where `log`) or `choices`."""

    name: str
    kind: str  # uniform | loguniform | int | categorical
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: int | None = None
    choices: tuple[Scalar, ...] = ()

    def to_settings(self) -> dict[str, object]:
        if self.kind == "categorical":
            return {"kind": self.kind, "choices": list(self.choices)}
        return {"kind": self.kind, "low": self.low, "high": self.high, "log": self.log,
                **({"step": self.step} if self.step else {})}

    def contains(self, value: object) -> bool:
        """Whether `value` is one this dimension could ask today (a revision may have changed it
        under trials already asked)."""
        if self.kind == "categorical":
            return any(type(value) is type(c) and value == c for c in self.choices)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not self.low <= value <= self.high:
            return False
        if self.kind == "int":
            return isinstance(value, int) and (value - int(self.low)) % (self.step or 1) == 0
        return True

    def describe(self) -> str:
        if self.kind == "categorical":
            return f"{self.name} ∈ {{{', '.join(map(str, self.choices))}}}"
        scale = " (log)" if self.log and self.kind == "int" else ""
        return f"{self.name} {self.kind} [{self.low:g}, {self.high:g}]{scale}"


@dataclass(frozen=True, slots=True)
class SearchSpec:
    space: tuple[Dimension, ...]
    fixed: Mapping[str, Scalar] = field(default_factory=dict)
    sampler: str = "tpe"
    metric: str = ""
    goal: str = "min"
    trials: int = 1
    parallel: int = DEFAULT_PARALLEL
    seed: int = 0
    promotion: str = "async"  # with rungs (core/tuning/asha.py): async | sync
    ahead: int = 0  # trials asked before a slot frees, each queued behind a running one (core/tuning/search.py)

    def to_settings(self) -> dict[str, object]:
        return {"sampler": self.sampler, "metric": self.metric, "goal": self.goal, "trials": self.trials,
                "parallel": self.parallel, "ahead": self.ahead, "seed": self.seed, "promotion": self.promotion,
                "fixed": dict(self.fixed),
                "space": [d.to_settings() | {"name": d.name} for d in self.space]}

    @property
    def first_asks(self) -> int:
        """How many trials the first tick asks for: the slots, or every trial if fewer."""
        return min(self.parallel, self.trials)

    def describe(self) -> str:
        return (f"{self.sampler} search, {self.trials} trials, {self.parallel} at once, {self.goal} "
                f"{self.metric}: " + "; ".join(d.describe() for d in self.space))


def read_search(r: Reader, objective: tuple[str, str] | None) -> SearchSpec | None:
    """`search:`, validated; `objective` the spec's (metric, goal), which the search's must match."""
    p: KeyPath = ("search",)
    if r.get(p) in (Reader.MISSING, None):
        return None
    top = r.mapping(p, SEARCH_KEYS)
    if top is None:
        return None
    for other in ("matrix", "tasks"):
        if r.get((other,)) is not Reader.MISSING:
            r.problem((other,), f"a search's trials are its tasks: give `search:` or `{other}:`, not both")
    sampler = r.choice((*p, "sampler"), SAMPLERS) or "tpe"
    metric = r.pattern((*p, "metric"), METRIC_NAME, "the name of a metric the trials report, e.g. val_loss")
    goal = r.choice((*p, "goal"), ("min", "max"))
    if objective is not None:
        if (metric and metric != objective[0]) or (goal and goal != objective[1]):
            r.problem((*p, "metric"), f"the search optimises {goal or 'min'} {metric}, `objective:` says "
                                      f"{objective[1]} {objective[0]}: name one, or the same in both")
        metric, goal = metric or objective[0], goal or objective[1]
    if not metric:
        r.problem((*p, "metric"), "is required (or `objective:`): the metric each trial is told, e.g. val_loss")
    trials = r.integer((*p, "trials"), 1, MAX_TASKS)
    if trials is None:
        r.problem((*p, "trials"), "is required: how many trials the search runs, e.g. 24")
    parallel = r.integer((*p, "parallel"), 1, MAX_TASKS, default=DEFAULT_PARALLEL) or DEFAULT_PARALLEL
    seed = r.integer((*p, "seed"), 0, 2**32 - 1, default=0) or 0
    promotion = r.choice((*p, "promotion"), PROMOTIONS) or "async"
    ahead = r.integer((*p, "ahead"), 0, parallel, default=0) or 0
    space, fixed = _space(r, (*p, "space"), top.get("space"))
    return SearchSpec(tuple(space), fixed, sampler, metric or "", goal or "min", trials or 1, parallel, seed,
                      promotion, ahead)


def _space(r: Reader, p: KeyPath, value: object) -> tuple[list[Dimension], dict[str, Scalar]]:
    if not isinstance(value, dict) or not value:
        r.problem(p, "is required: a mapping of parameter: {uniform|loguniform|int|categorical: …} or a fixed value")
        return [], {}
    dims: list[Dimension] = []
    fixed: dict[str, Scalar] = {}
    for name, entry in value.items():
        path: KeyPath = (*p, name)
        if not isinstance(name, str) or not IDENTIFIER.match(name):
            r.problem(path, "parameter names use A-Z a-z 0-9 _ and start with a letter or _")
        elif isinstance(entry, SCALAR_TYPES):
            fixed[name] = entry
        elif isinstance(entry, dict):
            dim = _dimension(r, path, name, entry)
            if dim is not None:
                dims.append(dim)
        else:
            r.problem(path, f"must be a fixed value or one of {{{', '.join(KINDS)}: …}}, got {type(entry).__name__}")
    if not dims and not r.problems:
        r.problem(p, "samples nothing: give at least one parameter a range or choices")
    return dims, fixed


def _dimension(r: Reader, path: KeyPath, name: str, entry: dict[str, Any]) -> Dimension | None:
    kinds = [k for k in entry if k in KINDS]
    if len(kinds) != 1:
        r.problem(path, f"give exactly one of {', '.join(KINDS)}, e.g. {{uniform: [0.0, 0.5]}}")
        return None
    kind = kinds[0]
    for key in entry:
        if key != kind and key not in RANGE_KEYS[kind]:
            allowed = ", ".join((kind, *RANGE_KEYS[kind]))
            r.problem((*path, key), f"unknown key for a {kind} parameter; allowed: {allowed}")
    bounds = entry[kind]
    if kind == "categorical":
        if not isinstance(bounds, list) or not bounds or not all(isinstance(c, SCALAR_TYPES) for c in bounds):
            r.problem((*path, kind), "must be a non-empty list of values, e.g. [adam, sgd]")
            return None
        if len(set(map(repr, bounds))) != len(bounds):
            r.problem((*path, kind), "lists a value twice")
            return None
        return Dimension(name, kind, choices=tuple(bounds))
    if not isinstance(bounds, list) or len(bounds) != 2 or not all(_bound(b) for b in bounds):
        r.problem((*path, kind), f"must be [low, high], two numbers within ±{MAX_BOUND:,}")
        return None
    low, high = float(bounds[0]), float(bounds[1])
    log = kind == "loguniform" or entry.get("log") is True
    if kind == "int" and not all(isinstance(b, int) for b in bounds):
        r.problem((*path, kind), "must be [low, high], two whole numbers")
        return None
    if not low < high:
        r.problem((*path, kind), f"low must be below high, got [{bounds[0]}, {bounds[1]}]")
        return None
    if log and low <= 0:
        r.problem((*path, kind), f"a log scale needs low above 0, got {bounds[0]}")
        return None
    step = entry.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        r.problem((*path, "step"), f"must be a whole number of at least 1, got {step!r}")
        step = None
    if step and log:
        r.problem((*path, "step"), "a step and a log scale do not combine (Optuna refuses both)")
        step = None
    if "log" in entry and not isinstance(entry["log"], bool):
        r.problem((*path, "log"), f"must be true or false, got {entry['log']!r}")
    return Dimension(name, kind, low, high, log, step)


def _bound(value: object) -> bool:
    """A finite number a float holds exactly enough: YAML reads 10**400 as an int, which
    math.isfinite() cannot even convert (OverflowError), and the samplers work in floats."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) <= MAX_BOUND if isinstance(value, int) else math.isfinite(value) and abs(value) <= MAX_BOUND


def search_from_settings(value: Any) -> SearchSpec | None:
    if not isinstance(value, dict) or not value.get("space"):
        return None
    space = tuple(Dimension(str(d["name"]), str(d["kind"]), float(d.get("low", 0.0)), float(d.get("high", 0.0)),
                            bool(d.get("log", False)), d.get("step"), tuple(d.get("choices") or ()))
                  for d in value["space"])
    return SearchSpec(space, dict(value.get("fixed") or {}), str(value.get("sampler") or "tpe"),
                      str(value.get("metric") or ""), str(value.get("goal") or "min"), int(value.get("trials") or 1),
                      int(value.get("parallel") or DEFAULT_PARALLEL), int(value.get("seed") or 0),
                      str(value.get("promotion") or "async"), int(value.get("ahead") or 0))


def as_trials(search: SearchSpec) -> Trials:
    """The search's tasks for expand_tasks: an unasked trial's argv holds each sampled parameter's
    low end (or first choice), never run: the ask renders every trial's first attempt with its own."""
    return Trials(search.trials, search.fixed,
                  {d.name: d.choices[0] if d.choices else (int(d.low) if d.kind == "int" else d.low)
                   for d in search.space})
