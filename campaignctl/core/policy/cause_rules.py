"""What a rule for a program-output cause changes for the next attempt. Pure.

`params`: the task's parameters scaled (the seed articles' adaptive batch sizing: halve the
micro-batch, double gradient accumulation, keep the effective batch). `roomier_gpu_type`: a GPU
OOM moves to a listed type with more memory per GPU (the policy's `prices.gpu_memory`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.model.params import Scalar
from campaignctl.core.policy.policy import ParamStep, Policy


@dataclass(frozen=True, slots=True)
class ParamChange:
    params: dict[str, Scalar]  # the next attempt's, complete
    changes: dict[str, list[Scalar]]  # name → [old, new]
    stuck: str = ""  # why no change is possible ('' when `params` holds one)


def step_params(current: Mapping[str, Scalar], steps: Mapping[str, ParamStep]) -> ParamChange:
    """Every parameter in `steps` moved by its factor. Integers stay integers, rounded away from
    the old value (floor when shrinking, ceil when growing) so each step really changes them,
    and never below 1: 3 × 0.5 → 1, 1 × 1.5 → 2. A parameter that cannot move (at its min/max,
    absent, not a number) makes the whole step impossible: shrinking the batch without doubling
    accumulation would change the effective batch the user asked for."""
    new = dict(current)
    changes: dict[str, list[Scalar]] = {}
    for name, step in steps.items():
        old = current.get(name)
        if old is None:
            known = ", ".join(sorted(current)) or "none"
            return ParamChange(dict(current), {}, f"the task has no parameter {name!r} (its parameters: {known})")
        if isinstance(old, bool) or not isinstance(old, (int, float)):
            return ParamChange(dict(current), {}, f"parameter {name} is {old!r}, not a number to scale")
        value = _scaled(old, step)
        if value == old:
            bound = "min" if step.factor < 1 else "max"
            limit = step.min if step.factor < 1 else step.max
            at = f"its {bound} {limit:g}" if limit is not None else "the smallest whole number, 1"
            return ParamChange(dict(current), {}, f"parameter {name} is {old}, already at {at}")
        new[name] = value
        changes[name] = [old, value]
    return ParamChange(new, changes)


def _scaled(old: int | float, step: ParamStep) -> int | float:
    raw = round(old * step.factor, 9)
    if step.min is not None:
        raw = max(raw, step.min)
    if step.max is not None:
        raw = min(raw, step.max)
    if isinstance(old, float):
        return raw
    rounded = math.floor(raw) if step.factor < 1 else math.ceil(raw)
    if step.min is not None and rounded < step.min:
        rounded = math.ceil(step.min)
    if step.max is not None and rounded > step.max:
        rounded = math.floor(step.max)
    return max(rounded, 1) if old >= 1 else rounded


def unknown_rule_params(policy: Policy, task_params: Sequence[Mapping[str, Scalar]]) -> list[tuple[str, str, str]]:
    """(cause, parameter, problem) for every rule `params` key that no task has: a typo would
    otherwise surface only when the first GPU runs out of memory, hours in, as a give-up."""
    known = sorted(set().union(*task_params)) if task_params else []
    listed = ", ".join(known) or "none (add a matrix or tasks list)"
    return [(cause, name, f"rules.{cause}.params names {name!r}, which no task has; task parameters: {listed}")
            for cause, rule in sorted(policy.rules.items()) for name in rule.params if name not in known]


def roomier_gpu_type(current: str | None, acceptable: Sequence[str], policy: Policy) -> str | None:
    """The listed type with the least memory above the current one's (cheapest first on a tie,
    then the spec's order); None when the current type's memory is unknown or none is larger."""
    memory = policy.prices.gpu_memory_mb
    if current is None or current not in memory:
        return None
    larger = [(memory[t], policy.prices.gpu(t), i, t) for i, t in enumerate(acceptable)
              if t != current and memory.get(t, 0) > memory[current]]
    return min(larger)[3] if larger else None
