"""The policy sections beyond per-cause rules: prices (cost of a GPU/CPU hour), GPU-type
fallback, and utilisation rules. Pure values and their readers; `decide` and friends apply them.

    prices:      {gpu_hour: {a100: 3.0, v100: 1.2, default: 2.0}, cpu_hour: 0.02,
                  gpu_memory: {a100: 80G, v100: 16G}}   # per GPU: where a GPU OOM may move
    fallback:    {after: 10m, max_moves: 2, mode: enforce}
    utilisation: {window: 10m, gpu_low_pct: 20, cpu_busy_pct: 80, cpu_idle_pct: 30,
                  data_starved: {action: more_cpus, cpu_factor: 2, max_cpus: 16, resize_pending: true},
                  gpu_idle: {action: fewer_gpus, gpu_factor: 0.5, cancel_running: false}}
    approval:    {max_mem: 64G, max_gpus: 4, max_cpus: 32, max_tasks: 50, always: [gpu_idle], expire_after: 24h}
    early_stopping: {rule: median, metric: val_loss, goal: min, grace_steps: 5, min_peers: 3, mode: enforce}

A rule's `mode: shadow` logs its decisions as proposals and never carries them out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader
from campaignctl.core.base.safety import SLURM_WORD
from campaignctl.core.model.training_metrics import METRIC_NAME, RESERVED
from campaignctl.core.model.training_metrics import MODES as GOALS

PRICE_KEYS = ("gpu_hour", "cpu_hour", "gpu_memory")
FALLBACK_KEYS = ("after", "max_moves", "mode")
UTILISATION_KEYS = ("window", "gpu_low_pct", "cpu_busy_pct", "cpu_idle_pct", "data_starved", "gpu_idle")
STARVED_KEYS = ("action", "cpu_factor", "max_cpus", "resize_pending", "mode")
IDLE_KEYS = ("action", "gpu_factor", "cancel_running", "mode")
APPROVAL_KEYS = ("max_mem", "max_gpus", "max_cpus", "max_tasks", "always", "expire_after")
EARLY_STOPPING_KEYS = ("rule", "metric", "goal", "grace_steps", "min_peers", "mode")
MODES = ("enforce", "shadow")
# Rules beyond the per-cause ones that have a mode and can be named in approval.always.
SECTION_RULES = ("data_starved", "gpu_idle", "gpu_fallback", "early_stopping", "right_size", "move")
STOPPING_RULES = ("none", "median")
STARVED_ACTIONS = ("none", "more_cpus")
IDLE_ACTIONS = ("none", "fewer_gpus")
DEFAULT_GPU = "default"  # the price of a GPU type the table does not list
_PRICE = "a price per hour, 0 or more"


@dataclass(frozen=True, slots=True)
class Prices:
    """Money per hour of one GPU (by type) and of one CPU. 0 when unknown: spend in money is
    then 0 and only GPU/CPU-hour budgets bind."""

    gpu_hour: dict[str, float] = field(default_factory=dict)
    cpu_hour: float = 0.0
    gpu_memory_mb: dict[str, int] = field(default_factory=dict)  # memory of one GPU, by type

    def gpu(self, gpu_type: str | None) -> float:
        table = self.gpu_hour
        return table.get(gpu_type or DEFAULT_GPU, table.get(DEFAULT_GPU, 0.0))


@dataclass(frozen=True, slots=True)
class Fallback:
    after_s: int = 0  # pending this long for lack of its GPU type → move to another listed type; 0: off
    max_moves: int = 2  # moves per task, so a task never bounces between saturated types forever
    mode: str = "enforce"


@dataclass(frozen=True, slots=True)
class DataStarved:
    """GPUs below gpu_low_pct while the CPUs are saturated: the input pipeline is the bottleneck."""

    action: str = "none"
    cpu_factor: float = 2.0
    max_cpus: int = 16
    resize_pending: bool = True  # pending siblings get the CPUs too (scontrol update NumCPUs)
    mode: str = "enforce"


@dataclass(frozen=True, slots=True)
class GpuIdle:
    """GPUs below gpu_low_pct and CPUs idle too: the task holds more GPUs than it uses."""

    action: str = "none"
    gpu_factor: float = 0.5
    cancel_running: bool = False  # cancel the running attempt and resubmit it with fewer GPUs
    mode: str = "enforce"


@dataclass(frozen=True, slots=True)
class Utilisation:
    window_s: int = 600
    gpu_low_pct: float = 20.0
    cpu_busy_pct: float = 80.0  # of the task's allocated CPUs
    cpu_idle_pct: float = 30.0
    data_starved: DataStarved = field(default_factory=DataStarved)
    gpu_idle: GpuIdle = field(default_factory=GpuIdle)

    @property
    def enabled(self) -> bool:
        return self.data_starved.action != "none" or self.gpu_idle.action != "none"


@dataclass(frozen=True, slots=True)
class Approval:
    """Decisions above these wait as `awaiting-approval` until `campaignctl approve` (0: no limit)."""

    max_mem_mb: int = 0  # a new attempt or pending job asking for more memory than this
    max_gpus: int = 0
    max_cpus: int = 0
    max_tasks: int = 0  # one rule acting on more tasks than this in one tick
    always: tuple[str, ...] = ()  # rules whose every Slurm-changing decision needs approval
    expire_after_s: int = 86400  # unanswered this long → expired (not carried out)

    @property
    def enabled(self) -> bool:
        return bool(self.max_mem_mb or self.max_gpus or self.max_cpus or self.max_tasks or self.always)


@dataclass(frozen=True, slots=True)
class EarlyStopping:
    """Stop a running task whose `metric` trails its peers' (core/tick/early_stop.py); off until a
    metric is named."""

    rule: str = "median"  # none: off
    metric: str = ""  # a name tasks report with campaignctl.report(); '': off
    goal: str = "min"  # min: lower is better (a loss); max: higher is better (an accuracy)
    grace_steps: int = 0  # no task is stopped before it reports this step
    min_peers: int = 3  # peers that reached the step, needed for a median worth acting on
    mode: str = "enforce"

    @property
    def enabled(self) -> bool:
        return self.rule != "none" and bool(self.metric)


def sections_from_dict(data: dict[str, Any]) -> dict[str, Any]:
    """Stored policy JSON → section values; a policy stored before these sections existed gets defaults."""
    prices = data.get("prices") or {}
    fallback = data.get("fallback") or {}
    util = dict(data.get("utilisation") or {})
    if util:
        util["data_starved"] = DataStarved(**util.get("data_starved", {}))
        util["gpu_idle"] = GpuIdle(**util.get("gpu_idle", {}))
    approval = dict(data.get("approval") or {})
    approval["always"] = tuple(approval.get("always", ()))
    return {"prices": Prices(**prices), "fallback": Fallback(**fallback), "utilisation": Utilisation(**util),
            "approval": Approval(**approval), "early_stopping": EarlyStopping(**data.get("early_stopping") or {})}


def read_prices(r: Reader, path: KeyPath, base: Prices) -> Prices:
    doc = r.mapping(path, PRICE_KEYS)
    if doc is None:
        return base
    table = dict(base.gpu_hour)
    gpu_doc = doc.get("gpu_hour") or {}
    if not isinstance(gpu_doc, dict):
        r.problem((*path, "gpu_hour"), "must be a mapping of GPU type: price per GPU-hour, e.g. {a100: 3.0}")
        gpu_doc = {}
    for gpu_type in gpu_doc:
        if gpu_type != DEFAULT_GPU and not (isinstance(gpu_type, str) and SLURM_WORD.match(gpu_type)):
            r.problem((*path, "gpu_hour", gpu_type), "a GPU type name such as a100, or `default`")
            continue
        price = r.bounded((*path, "gpu_hour", gpu_type), 0, math.inf, _PRICE)
        if price is not None:
            table[gpu_type] = price
    cpu = r.bounded((*path, "cpu_hour"), 0, math.inf, _PRICE)
    return Prices(gpu_hour=table, cpu_hour=base.cpu_hour if cpu is None else cpu,
                  gpu_memory_mb=_gpu_memory(r, (*path, "gpu_memory"), base.gpu_memory_mb))


def _gpu_memory(r: Reader, path: KeyPath, base: dict[str, int]) -> dict[str, int]:
    doc = given_mapping(r, path, "GPU type: memory of one GPU, e.g. {a100: 80G, v100: 16G}")
    if doc is None:
        return dict(base)
    table = dict(base)
    for gpu_type in doc:
        if not (isinstance(gpu_type, str) and SLURM_WORD.match(gpu_type)):
            r.problem((*path, gpu_type), "a GPU type name such as a100")
            continue
        table[gpu_type] = r.memory((*path, gpu_type), "1M")
    return table


def read_fallback(r: Reader, path: KeyPath, base: Fallback) -> Fallback:
    if r.mapping(path, FALLBACK_KEYS) is None:
        return base
    moves = r.integer((*path, "max_moves"), 1, 100, default=base.max_moves)
    return Fallback(after_s=r.duration((*path, "after"), base.after_s),
                    max_moves=base.max_moves if moves is None else moves,
                    mode=r.choice((*path, "mode"), MODES) or base.mode)


def read_utilisation(r: Reader, path: KeyPath, base: Utilisation) -> Utilisation:
    if r.mapping(path, UTILISATION_KEYS) is None:
        return base
    window = r.duration((*path, "window"), base.window_s)
    if window <= 0:
        r.problem((*path, "window"), "must be longer than 0, e.g. 10m")
    return Utilisation(
        window_s=window,
        gpu_low_pct=_percent(r, (*path, "gpu_low_pct"), base.gpu_low_pct),
        cpu_busy_pct=_percent(r, (*path, "cpu_busy_pct"), base.cpu_busy_pct),
        cpu_idle_pct=_percent(r, (*path, "cpu_idle_pct"), base.cpu_idle_pct),
        data_starved=_starved(r, (*path, "data_starved"), base.data_starved),
        gpu_idle=_idle(r, (*path, "gpu_idle"), base.gpu_idle))


def _percent(r: Reader, path: KeyPath, default: float) -> float:
    value = r.bounded(path, 0, 100, "a percentage from 0 to 100")
    return default if value is None else value


def _starved(r: Reader, path: KeyPath, base: DataStarved) -> DataStarved:
    if r.mapping(path, STARVED_KEYS) is None:
        return base
    factor = r.number((*path, "cpu_factor"), minimum=1.0)
    max_cpus = r.integer((*path, "max_cpus"), 1, 1024, default=base.max_cpus)
    return DataStarved(action=r.choice((*path, "action"), STARVED_ACTIONS) or base.action,
                       cpu_factor=base.cpu_factor if factor is None else factor,
                       max_cpus=base.max_cpus if max_cpus is None else max_cpus,
                       resize_pending=r.boolean((*path, "resize_pending"), base.resize_pending),
                       mode=r.choice((*path, "mode"), MODES) or base.mode)


def _idle(r: Reader, path: KeyPath, base: GpuIdle) -> GpuIdle:
    if r.mapping(path, IDLE_KEYS) is None:
        return base
    factor = r.bounded((*path, "gpu_factor"), 0.01, 0.99, "a fraction from 0.01 to 0.99 (0.5 halves the GPUs)")
    return GpuIdle(action=r.choice((*path, "action"), IDLE_ACTIONS) or base.action,
                   gpu_factor=base.gpu_factor if factor is None else factor,
                   cancel_running=r.boolean((*path, "cancel_running"), base.cancel_running),
                   mode=r.choice((*path, "mode"), MODES) or base.mode)


def read_early_stopping(r: Reader, path: KeyPath, base: EarlyStopping) -> EarlyStopping:
    if r.mapping(path, EARLY_STOPPING_KEYS) is None:
        return base
    metric = r.pattern((*path, "metric"), METRIC_NAME, "a metric name tasks report, e.g. val_loss")
    if metric in RESERVED:
        r.problem((*path, "metric"), f"{metric!r} is not a metric (reserved in a report line); name one, e.g. val_loss")
        metric = None
    grace = r.integer((*path, "grace_steps"), 0, 1_000_000_000, default=base.grace_steps)
    peers = r.integer((*path, "min_peers"), 1, 100_000, default=base.min_peers)
    section = EarlyStopping(rule=r.choice((*path, "rule"), STOPPING_RULES) or base.rule,
                            metric=base.metric if metric is None else metric,
                            goal=r.choice((*path, "goal"), GOALS) or base.goal,
                            grace_steps=base.grace_steps if grace is None else grace,
                            min_peers=base.min_peers if peers is None else peers,
                            mode=r.choice((*path, "mode"), MODES) or base.mode)
    if section.rule != "none" and not section.metric and not given(r.get((*path, "metric"))):
        r.problem(path, f"names no metric, so rule {section.rule} cannot run; add e.g. `metric: val_loss` "
                        "(a name tasks report), or `rule: none`")
    return section


def read_approval(r: Reader, path: KeyPath, base: Approval, rule_names: tuple[str, ...]) -> Approval:
    if r.mapping(path, APPROVAL_KEYS) is None:
        return base
    g = r.get
    mem = r.memory((*path, "max_mem"), "1M") if given(g((*path, "max_mem"))) else base.max_mem_mb
    gpus = r.integer((*path, "max_gpus"), 0, 1024, default=base.max_gpus)
    cpus = r.integer((*path, "max_cpus"), 0, 100_000, default=base.max_cpus)
    tasks = r.integer((*path, "max_tasks"), 0, 10_000_000, default=base.max_tasks)
    always = g((*path, "always"))
    if not given(always):
        always = list(base.always)
    elif not isinstance(always, list) or not all(isinstance(a, str) and a in rule_names for a in always):
        r.problem((*path, "always"), f"must be a list of rule names from: {', '.join(rule_names)}")
        always = list(base.always)
    return Approval(max_mem_mb=mem, max_gpus=base.max_gpus if gpus is None else gpus,
                    max_cpus=base.max_cpus if cpus is None else cpus,
                    max_tasks=base.max_tasks if tasks is None else tasks, always=tuple(always),
                    expire_after_s=r.duration((*path, "expire_after"), base.expire_after_s))


def given(value: object) -> bool:
    return value is not None and value is not Reader.MISSING


def given_mapping(r: Reader, path: KeyPath, shape: str) -> dict | None:
    """The mapping at `path`; None when it is absent (the base policy's value stands) or is not
    a mapping (then a problem says it must be a mapping of `shape`)."""
    doc = r.get(path)
    if not given(doc):
        return None
    if not isinstance(doc, dict):
        r.problem(path, f"must be a mapping of {shape}")
        return None
    return doc
