"""The campaign spec: frozen domain values built from a `RawDoc` by strict validation."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from campaignctl.core.base.hostlist import hostlist_size, split_nodes
from campaignctl.core.base.rawdoc import KeyPath, RawDoc
from campaignctl.core.base.reader import Reader
from campaignctl.core.base.safety import (
    CAMPAIGN_NAME,
    CONSTRAINT,
    CPU_BIND,
    GPU_BIND,
    HOSTLIST,
    SLURM_WORD,
)
from campaignctl.core.governance.ownership import read_share
from campaignctl.core.model.job_env import CAPTURE_EVERYTHING, EnvCapture, read_env_capture, read_setup
from campaignctl.core.model.params import TaskSpec, expand_tasks, placeholders, read_checkpoint
from campaignctl.core.model.tracker import read_trackers, tracker_env
from campaignctl.core.packing.profile import Profile, group_of, read_profile
from campaignctl.core.policy.cause_rules import unknown_rule_params
from campaignctl.core.policy.notify_config import read_notify
from campaignctl.core.policy.policy import Policy, read_overrides
from campaignctl.core.resources import LAUNCHERS, SRUN, Resources
from campaignctl.core.spec.clusters_spec import ClusterSpec, read_clusters
from campaignctl.core.spec.objective import ObjectiveSpec, read_objective
from campaignctl.core.spec.pack_spec import PackSpec, read_pack
from campaignctl.core.spec.rungs import Rung, read_rungs
from campaignctl.core.spec.search_spec import SearchSpec, as_trials, read_search
from campaignctl.core.tuning.output_metrics import read_output_patterns

TOP_KEYS = ("name", "command", "matrix", "tasks", "env", "resources", "array", "policy", "budget",
            "workdir", "run_dir", "description", "telemetry", "rungs", "env_capture", "setup", "metrics", "notify",
            "share", "profile", "objective", "pack", "search", "checkpoint", "tracker", "clusters")
TELEMETRY_KEYS = ("interval", "interfaces")
# a network interface (`ib0`), an InfiniBand HCA (`mlx5_0`) or one of its ports (`mlx5_0:1`)
_INTERFACE = re.compile(r"^[A-Za-z0-9_.-]{1,15}(?::[0-9]{1,3})?$")
DEFAULT_TELEMETRY_S = 10
RESOURCE_KEYS = ("partition", "gpus", "min_gpus", "gpu_type", "cpus_per_task", "mem", "time", "cpu_bind",
                 "gpu_bind", "account", "qos", "constraint", "exclude", "nodes", "tasks_per_node", "launcher")
ARRAY_KEYS = ("max_parallel",)
BUDGET_KEYS = ("gpu_hours", "cpu_hours", "money", "energy_kwh")
BUDGET_WARN_AT = 0.8
DEFAULT_TIME = "01:00:00"
DEFAULT_MEM = "1G"
MAX_EXCLUDED = 10_000  # nodes a spec's `exclude` may name (the largest clusters have about as many)


@dataclass(frozen=True, slots=True)
class Budget:
    gpu_hours: float | None = None
    cpu_hours: float | None = None
    money: float | None = None
    energy_kwh: float | None = None  # measured: sacct ConsumedEnergy, else NVML GPU power (core/usage/energy.py)
    warn_at: float = BUDGET_WARN_AT  # alert once spent + committed passes this fraction of a limit

    def limits(self) -> dict[str, float]:
        """The dimensions that are set, e.g. {"gpu_hours": 100.0}."""
        return {k: v for k in BUDGET_KEYS if (v := getattr(self, k)) is not None}


@dataclass(frozen=True, slots=True)
class CampaignSpec:
    name: str
    tasks: tuple[TaskSpec, ...]
    resources: Resources
    max_parallel: int | None
    policy_ref: str
    policy: Policy
    budget: Budget
    workdir: str
    run_dir: str
    description: str
    spec_hash: str
    telemetry_interval_s: int = DEFAULT_TELEMETRY_S  # 0: no sampler in the job
    # a multi-node attempt's network: the interfaces its sampler counts (): every device-backed one
    telemetry_interfaces: tuple[str, ...] = ()
    gpu_types: tuple[str, ...] = ()  # acceptable GPU types, preferred first; resources.gpu_type is the first
    min_gpus: int = 0  # utilisation rules never give a task fewer GPUs than this
    rungs: tuple[Rung, ...] = ()  # a progressive campaign: tasks are configs × rungs (params.expand_tasks)
    env_capture: EnvCapture = CAPTURE_EVERYTHING  # which submitting-shell variables every attempt gets
    setup: tuple[str, ...] = ()  # shell lines run in the job before the program, every attempt
    output_metrics: tuple[str, ...] = ()  # metrics.from_output regexes (core/tuning/output_metrics.py)
    captured_env: str = ""  # the revision's captured environment file: set from the store, not the YAML
    command: tuple[str, ...] = ()  # the argv template ({param} placeholders), to render a retry's new params
    env: Mapping[str, str] = field(default_factory=dict)  # the env templates, likewise
    share_group: str | None = None  # `share: {group: G}`: G's members may act on the campaign too
    profile: Profile | None = None  # `profile:`: the kind of work its history is pooled under (right_size)
    objective: ObjectiveSpec | None = None  # `objective:` (core/spec/objective.py)
    pack: PackSpec | None = None  # `pack:`: small tasks sharing GPUs and jobs (core/spec/pack_spec.py)
    search: SearchSpec | None = None  # `search:`: trials a sampler asks for (core/spec/search_spec.py)
    checkpoint: str = ""  # `checkpoint:`: the file whose presence makes an attempt resume (params.checkpoint_marker)
    trackers: tuple[str, ...] = ()  # `tracker:`: wandb, mlflow (core/model/tracker.py)
    clusters: tuple[ClusterSpec, ...] = ()  # `clusters:` (core/spec/clusters_spec.py); () : SLURM_CONF's

    @property
    def configs(self) -> int:
        return len(self.tasks) // max(1, len(self.rungs))

    def resources_of(self, task_index: int) -> Resources:
        """What a task's first attempt asks for: its rung's resources, or the campaign's."""
        return self.rungs[self.tasks[task_index].rung].resources if self.rungs else self.resources

    def first_tasks(self) -> list[int]:
        """What `submit` starts: every task, or with rungs the first rung's (the rest are promoted);
        none of a search's (its first tick asks for the first trials)."""
        return [] if self.search else [t.index for t in self.tasks if t.rung == 0]

    def settings(self) -> dict[str, object]:
        """What a reconcile tick needs without re-reading the spec (stored with the revision)."""
        b = self.budget
        settings: dict[str, object] = {
            "tasks": len(self.tasks), "max_parallel": self.max_parallel, "gpu_types": list(self.gpu_types),
            "min_gpus": self.min_gpus,
            "budget": {"gpu_hours": b.gpu_hours, "cpu_hours": b.cpu_hours, "money": b.money,
                       "energy_kwh": b.energy_kwh, "warn_at": b.warn_at}}
        if self.rungs:
            settings.update(configs=self.configs, rungs=[rung.to_settings() for rung in self.rungs])
        settings["exclude"] = sorted({n for r in (self.resources, *(rung.resources for rung in self.rungs))
                                      for n in split_nodes(r.exclude or "")})
        if self.share_group:
            settings["share"] = {"group": self.share_group}
        if self.profile:
            shared = {"shared": True} if self.profile.shared else {}
            settings["profile"] = {"name": self.profile.name, "by": list(self.profile.by), **shared}
        if self.objective:
            settings["objective"] = self.objective.to_settings()
        if self.pack:
            settings["pack"] = self.pack.to_settings()
        if self.clusters:
            settings["clusters"] = [c.to_settings() for c in self.clusters]
        if self.search:  # with what each trial's first attempt asks for: the budget gate prices it
            settings["search"] = {**self.search.to_settings(), "resources": asdict(self.resources_of(0))}
        return settings

    def group_of(self, task_index: int) -> str:
        """The profile group of a task: its rung and the parameters `profile.by` names."""
        task = self.tasks[task_index]
        return group_of(task.rung, task.params, self.profile.by if self.profile else ())


def spec_hash(data: object) -> str:
    """Content hash of the parsed spec (key order and formatting do not matter)."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def policy_reference(doc: RawDoc) -> str:
    """Which policy the spec names: `policy: NAME|PATH` or `policy: {use: NAME|PATH, …}`."""
    value = doc.data.get("policy") if isinstance(doc.data, dict) else None
    if isinstance(value, dict):
        value = value.get("use", "default")
    return value if isinstance(value, str) and value else "default"


def names_policy_file(reference: str) -> bool:
    """A policy reference with a `/` or a YAML suffix is a path; any other is a built-in's name."""
    return "/" in reference or reference.endswith((".yaml", ".yml"))


def validate_spec(doc: RawDoc, spec_dir: str, base_policy: Policy | None = None) -> CampaignSpec:
    """Validate `doc`; relative paths are taken from `spec_dir`; `base_policy` is the policy the
    spec names (loaded by the caller), which the spec's `policy:` mapping may override.
    Raises SpecError listing every problem."""
    r = Reader(doc)
    top = r.mapping((), TOP_KEYS, required=True) or {}
    name = r.pattern(("name",), CAMPAIGN_NAME, "1-64 characters from A-Z a-z 0-9 _ . -, starting "
                     "with a letter or digit", required=True) or "invalid"
    resources, gpu_types, min_gpus = _resources(r)
    max_parallel = _max_parallel(r)
    budget = _budget(r)
    policy = _policy(r, base_policy or Policy())
    workdir = _join(spec_dir, r.string(("workdir",), default=".", path_like=True) or ".")
    run_dir = _join(workdir, r.string(("run_dir",), default=f"runs/{name}", path_like=True) or ".")
    description = r.string(("description",), default="") or ""
    objective = read_objective(r)
    search = read_search(r, (objective.metric, objective.goal) if objective else None)
    if search is not None:  # the search's metric is the campaign's objective: results rank by it
        objective = ObjectiveSpec(search.metric, search.goal)
    rungs = read_rungs(r, resources, objective)
    trackers = read_trackers(r, top)
    if (added := tracker_env(trackers, name)) and isinstance(top.get("env", {}), dict):
        top = {**top, "env": {**added, **(top.get("env") or {})}}  # the spec's own env wins
    if search is not None:
        _check_search_rungs(r, rungs)
    tasks = expand_tasks(r, top, [rung.params for rung in rungs], run_dir, as_trials(search) if search else None)
    _check_rule_params(r, policy, tasks, top)
    telemetry_s, interfaces = _telemetry_interval(r), _telemetry_interfaces(r)
    env_capture, setup, output_metrics = read_env_capture(r), read_setup(r), read_output_patterns(r)
    share_group = read_share(r)
    profile = read_profile(r, tasks)
    pack = read_pack(r, resources, profile is not None)
    checkpoint = read_checkpoint(r, tasks)
    clusters = read_clusters(r)
    r.raise_if_problems()
    return CampaignSpec(name=name, tasks=tasks, resources=resources, max_parallel=max_parallel,
                        policy_ref=policy_reference(doc), policy=policy, budget=budget,
                        workdir=workdir, run_dir=run_dir, description=description,
                        spec_hash=spec_hash({"spec": doc.data, "policy": policy.digest}),
                        telemetry_interval_s=telemetry_s, telemetry_interfaces=interfaces,
                        gpu_types=gpu_types, min_gpus=min_gpus,
                        rungs=rungs, env_capture=env_capture, setup=setup, output_metrics=output_metrics,
                        command=tuple(str(a) for a in top.get("command") or ()),
                        env={str(k): str(v) for k, v in (top.get("env") or {}).items()},
                        share_group=share_group, profile=profile, objective=objective, pack=pack, search=search,
                        checkpoint=checkpoint, trackers=trackers, clusters=clusters)


def _check_search_rungs(r: Reader, rungs: Sequence[Rung]) -> None:
    """A search's rungs promote asynchronously (core/tuning/asha.py): by rank among the results so far,
    so by `eta`; a threshold is a grid's (every config judged once its rung has settled)."""
    for rung in rungs:
        if rung.promote is not None and rung.promote.threshold is not None:
            r.problem(("rungs", rung.number, "promote", "threshold"),
                      "a search's rungs promote the best 1/eta of the trials so far: use eta")


def _check_rule_params(r: Reader, policy: Policy, tasks: Sequence[TaskSpec], top: dict) -> None:
    unknown = unknown_rule_params(policy, [t.params for t in tasks])
    for cause, name, problem in unknown:
        r.problem(("policy", "rules", cause, "params", name), problem)
    if unknown or r.problems:
        return
    templates = [str(a) for a in top.get("command") or ()] + [str(v) for v in (top.get("env") or {}).values()]
    used = {name for t in templates for name in placeholders(t)}
    for cause, rule in sorted(policy.rules.items()):
        for name in sorted(set(rule.params) - used):
            r.problem(("policy", "rules", cause, "params", name),
                      f"rules.{cause}.params changes {name!r}, which neither command nor env uses "
                      f"(as {{{name}}}): the retry would run exactly like the failed attempt")


def _join(base: str, path: str) -> str:
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(base, path))


def _resources(r: Reader) -> tuple[Resources, tuple[str, ...], int]:
    p: KeyPath = ("resources",)
    r.mapping(p, RESOURCE_KEYS)
    gpus = r.integer((*p, "gpus"), 0, 64, default=0) or 0
    gpu_types = _gpu_types(r, (*p, "gpu_type"))
    if gpu_types and not gpus:
        r.problem((*p, "gpu_type"), "is set but gpus is 0; set resources.gpus too")
    min_gpus = r.integer((*p, "min_gpus"), 1, 64, default=min(gpus, 1)) or 0
    if min_gpus > gpus:
        r.problem((*p, "min_gpus"), f"is {min_gpus}, more than resources.gpus ({gpus})")
    gpu_type = gpu_types[0] if gpu_types else None
    nodes, tasks_per_node, launcher = _layout(r, p, gpus)
    exclude = r.pattern((*p, "exclude"), HOSTLIST, "a host list such as node1,node[3-4]")
    if exclude and hostlist_size(exclude) > MAX_EXCLUDED:  # each tick names them one by one
        r.problem((*p, "exclude"), f"names {hostlist_size(exclude):,} nodes, more than {MAX_EXCLUDED:,}")
    return Resources(
        partition=r.pattern((*p, "partition"), SLURM_WORD, "a partition name such as batch"),
        gpus=gpus or 0,
        gpu_type=gpu_type,
        cpus_per_task=r.integer((*p, "cpus_per_task"), 1, 1024, default=1) or 1,
        mem_mb=r.memory((*p, "mem"), default=DEFAULT_MEM),
        time_min=r.time((*p, "time"), default=DEFAULT_TIME),
        cpu_bind=r.choice((*p, "cpu_bind"), CPU_BIND),
        gpu_bind=r.pattern((*p, "gpu_bind"), GPU_BIND, "none, closest or single:N"),
        account=r.pattern((*p, "account"), SLURM_WORD, "an account name"),
        qos=r.pattern((*p, "qos"), SLURM_WORD, "a QOS name"),
        constraint=r.pattern((*p, "constraint"), CONSTRAINT, "a feature expression such as a100|v100"),
        exclude=exclude, nodes=nodes, tasks_per_node=tasks_per_node, launcher=launcher,
    ), gpu_types, min_gpus


def _layout(r: Reader, p: KeyPath, gpus: int) -> tuple[int, int, str]:
    """`nodes`, `tasks_per_node`, `launcher`. A spec that names neither nodes nor launcher runs one
    process, as before; one that does gets one process per GPU on each node by default (the
    usual DDP layout), or one per node without GPUs."""
    nodes = r.integer((*p, "nodes"), 1, 1024, default=1) or 1
    launcher = r.choice((*p, "launcher"), LAUNCHERS) or SRUN
    multi = r.get((*p, "nodes")) is not Reader.MISSING or r.get((*p, "launcher")) is not Reader.MISSING
    tasks = r.integer((*p, "tasks_per_node"), 1, 256, default=max(gpus, 1) if multi else 1) or 1
    return nodes, tasks, launcher


def _gpu_types(r: Reader, path: KeyPath) -> tuple[str, ...]:
    """`gpu_type: a100`, or a preference list `[a100, v100]`: the first is asked for, the others
    are acceptable fallbacks (policy `fallback`)."""
    value = r.get(path)
    if isinstance(value, list):
        checked = [r.pattern((*path, i), SLURM_WORD, "a GPU type name such as a100") for i in range(len(value))]
        types = tuple(t for t in checked if t)
        if not value:
            r.problem(path, "must list at least one GPU type")
        if len(set(types)) != len(types):
            r.problem(path, "lists a GPU type twice")
        return types
    single = r.pattern(path, SLURM_WORD, "a GPU type name such as a100, or a list [a100, v100]")
    return (single,) if single else ()


def _policy(r: Reader, base: Policy) -> Policy:
    """The named policy, overridden by the spec's `policy:` mapping, its `notify:` by the spec's
    top-level `notify:` key by key (a team policy's webhook stays, the spec narrows `on:`)."""
    policy = base
    if isinstance(r.get(("policy",)), dict):
        r.string(("policy", "use"), path_like=True)
        policy = read_overrides(r, ("policy",), base)
    else:
        r.string(("policy",), path_like=True)
    notify = read_notify(r, ("notify",), policy.notify)
    return policy if notify == policy.notify else replace(policy, notify=notify)


def _telemetry_interval(r: Reader) -> int:
    r.mapping(("telemetry",), TELEMETRY_KEYS)
    seconds = r.duration(("telemetry", "interval"), DEFAULT_TELEMETRY_S)
    if seconds > 3600:
        r.problem(("telemetry", "interval"), f"must be at most 1h (0 turns sampling off), got {seconds} s")
    return seconds


def _telemetry_interfaces(r: Reader) -> tuple[str, ...]:
    value = r.get(("telemetry", "interfaces"))
    if value is Reader.MISSING or value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and _INTERFACE.match(v) for v in value):
        r.problem(("telemetry", "interfaces"), f"must be a list of interface names (ib0, eth0, mlx5_0, mlx5_0:1), "
                                               f"got {value!r}")
        return ()
    return tuple(value)


def _max_parallel(r: Reader) -> int | None:
    r.mapping(("array",), ARRAY_KEYS)
    return r.integer(("array", "max_parallel"), 1, 100_000)


def _budget(r: Reader) -> Budget:
    p: KeyPath = ("budget",)
    r.mapping(p, (*BUDGET_KEYS, "warn_at"))
    warn_at = r.number((*p, "warn_at"), minimum=0.0)
    if warn_at is not None and warn_at > 1:
        r.problem((*p, "warn_at"), f"must be a fraction of the budget from 0 to 1, e.g. 0.8; got {warn_at:g}")
        warn_at = None
    return Budget(**{k: r.number((*p, k), minimum=0.0) for k in BUDGET_KEYS},
                  warn_at=BUDGET_WARN_AT if warn_at is None else warn_at)
