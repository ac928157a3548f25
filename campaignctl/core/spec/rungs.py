"""`rungs:` in a spec: progressive (successive-halving) campaigns. Each rung overrides the
params and resources of the one before it; every rung but the last promotes its best configs.

    rungs:
      - name: screen
        params: {steps: 20, data_fraction: 0.25}
        resources: {gpus: 1, time: "00:10:00"}
        promote: {metric: val_loss, goal: min, eta: 3}     # keep the best third
      - name: grow
        params: {steps: 60}
        promote: {metric: val_loss, goal: min, threshold: 0.5}   # keep all at 0.5 or better
      - name: full
        params: {steps: 200, data_fraction: 1.0}
        resources: {gpus: 2}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader
from campaignctl.core.base.safety import CONSTRAINT, IDENTIFIER, SLURM_WORD, has_control_chars
from campaignctl.core.model.params import Scalar
from campaignctl.core.model.training_metrics import METRIC_NAME, MODES
from campaignctl.core.resources import Resources, resources_from, with_fields
from campaignctl.core.spec.objective import ObjectiveSpec

RUNG_KEYS = ("name", "params", "resources", "promote")
RUNG_RESOURCE_KEYS = ("partition", "gpus", "gpu_type", "cpus_per_task", "mem", "time", "constraint", "qos")
PROMOTE_KEYS = ("metric", "goal", "eta", "threshold", "by")
RANK_BY = ("last", "best")  # the value a config is ranked by: its last report, or its best one
MAX_RUNGS = 8


@dataclass(frozen=True, slots=True)
class Promotion:
    metric: str
    goal: str = "min"  # min: lower is better; max: higher is better
    eta: float | None = None  # keep the best floor(n / eta) configs (at least one)
    threshold: float | None = None  # keep every config at least this good
    by: str = "last"  # last: the value it ended the rung on; best: its best value in the rung

    def describe(self) -> str:
        metric = self.metric if self.by == "last" else f"best {self.metric}"
        if self.eta is not None:
            return f"best 1/{self.eta:g} by {metric} ({self.goal})"
        op = "<=" if self.goal == "min" else ">="
        return f"{metric} {op} {self.threshold:g}"


@dataclass(frozen=True, slots=True)
class Rung:
    number: int
    name: str
    params: Mapping[str, Scalar]  # every param this rung sets, its own and those inherited
    resources: Resources  # the resources its tasks ask for
    promote: Promotion | None  # None for the last rung

    def to_settings(self) -> dict[str, object]:
        """What a reconcile tick needs (stored with the revision)."""
        return {"name": self.name, "params": dict(self.params), "resources": asdict(self.resources),
                "promote": asdict(self.promote) if self.promote else None}


def rung_from_settings(number: int, data: Mapping[str, object]) -> Rung:
    promote, params = data.get("promote"), data.get("params")
    return Rung(number, str(data.get("name") or ""), dict(params) if isinstance(params, dict) else {},
                resources_from(data.get("resources") or {}) or Resources(),
                Promotion(**promote) if isinstance(promote, dict) else None)


def read_rungs(r: Reader, base: Resources, objective: ObjectiveSpec | None = None) -> tuple[Rung, ...]:
    """`objective`: the campaign's; a `promote:` that names no metric promotes by it."""
    value = r.get(("rungs",))
    if not isinstance(value, list):
        if isinstance(value, (dict, str, int, float)):
            r.problem(("rungs",), "must be a list of rungs, each {name, params, resources, promote}")
        return ()
    if not 2 <= len(value) <= MAX_RUNGS:
        r.problem(("rungs",), f"needs 2 to {MAX_RUNGS} rungs (one rung is a plain campaign), got {len(value)}")
        return ()
    rungs: list[Rung] = []
    params: dict[str, Scalar] = {}
    resources = base
    for i in range(len(value)):
        path: KeyPath = ("rungs", i)
        if r.mapping(path, RUNG_KEYS, required=True) is None:
            continue
        params = {**params, **_params(r, (*path, "params"))}
        resources = _resources(r, (*path, "resources"), resources)
        last = i == len(value) - 1
        rungs.append(Rung(i, _name(r, path, i, {x.name for x in rungs}), params, resources,
                          _promotion(r, (*path, "promote"), last, objective)))
    return tuple(rungs)


def _name(r: Reader, path: KeyPath, number: int, taken: set[str]) -> str:
    name = r.pattern((*path, "name"), SLURM_WORD, "a short name such as screen") or f"rung{number}"
    if name in taken:
        r.problem((*path, "name"), f"{name!r} names two rungs")
    return name


def _params(r: Reader, path: KeyPath) -> dict[str, Scalar]:
    raw = r.get(path)
    if not isinstance(raw, dict):
        if raw is not None and isinstance(raw, (list, str, int, float)):
            r.problem(path, "must be a mapping of parameter: value")
        return {}
    out: dict[str, Scalar] = {}
    for name, value in raw.items():
        if not (isinstance(name, str) and IDENTIFIER.match(name)):
            r.problem((*path, name), "parameter names use A-Z a-z 0-9 _ and start with a letter or _")
        elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
            r.problem((*path, name), f"must be a string or number, got {type(value).__name__}")
        elif isinstance(value, str) and has_control_chars(value):
            r.problem((*path, name), "must not contain newline, carriage return or NUL")
        else:
            out[name] = value
    return out


def _resources(r: Reader, path: KeyPath, base: Resources) -> Resources:
    given = r.mapping(path, RUNG_RESOURCE_KEYS) or {}
    changes: dict[str, object] = {}
    if "gpus" in given:
        changes["gpus"] = r.integer((*path, "gpus"), 0, 64, default=base.gpus)
    if "cpus_per_task" in given:
        changes["cpus_per_task"] = r.integer((*path, "cpus_per_task"), 1, 1024, default=base.cpus_per_task)
    if "mem" in given:
        changes["mem_mb"] = r.memory((*path, "mem"), default=f"{base.mem_mb}M")
    if "time" in given:
        changes["time_min"] = r.time((*path, "time"), default=str(base.time_min))
    for key, regex, allowed in (("partition", SLURM_WORD, "a partition name such as batch"),
                                ("gpu_type", SLURM_WORD, "a GPU type name such as a100"),
                                ("qos", SLURM_WORD, "a QOS name"),
                                ("constraint", CONSTRAINT, "a feature expression such as a100|v100")):
        if key in given:
            changes[key] = r.pattern((*path, key), regex, allowed)
    resources = with_fields(base, changes)
    if resources.gpu_type and not resources.gpus:
        r.problem(path, "sets gpu_type but the rung has 0 GPUs; set gpus too")
    return resources


def _promotion(r: Reader, path: KeyPath, last: bool, objective: ObjectiveSpec | None) -> Promotion | None:
    given = r.mapping(path, PROMOTE_KEYS)
    if last:
        if given is not None:
            r.problem(path, "the last rung has no rung to promote into; remove promote")
        return None
    if given is None:
        r.problem(path, "is required on every rung but the last: {metric: NAME, goal: min|max, eta: 3} "
                        "or {metric: NAME, goal: min|max, threshold: 0.5}")
        return None
    metric = r.pattern((*path, "metric"), METRIC_NAME, "the name of a metric the task reports",
                       required=objective is None) or (objective.metric if objective else None)
    goal = r.choice((*path, "goal"), MODES) or (objective.goal if objective else "min")
    eta = r.number((*path, "eta"), minimum=1.0)
    threshold = r.bounded((*path, "threshold"), -math.inf, math.inf, "a finite number")
    if (eta is None) == (threshold is None):
        r.problem(path, "set exactly one of eta (keep the best 1/eta) or threshold")
    by = r.choice((*path, "by"), RANK_BY) or "last"
    return Promotion(metric or "invalid", goal, eta, threshold, by)
