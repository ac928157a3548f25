"""`campaignctl simulate`: a campaign's tasks on a simulated cluster, once per policy, on the
same drawn (or traced) workload; the figures side by side. Reads the spec, the policies, the
cluster and trace files; runs core/sim; touches no Slurm and no store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from campaignctl.adapters.optuna_sampler import OptunaSampler
from campaignctl.adapters.policy_source import load_policy
from campaignctl.adapters.sim_files import read_cluster, read_trace
from campaignctl.core.base.errors import InputError
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing.packing import MIN_SAMPLES, choose_shape
from campaignctl.core.policy.policy import Policy
from campaignctl.core.sim.cluster import default_cluster
from campaignctl.core.sim.clusters import AND_MOVE, MODES, busy_jobs, several
from campaignctl.core.sim.driver import ATTEMPT_SCALED, ATTEMPT_SCALED_RETRIES, attempt_scaled_decider, policy_decider
from campaignctl.core.sim.engine import Decider, Engine
from campaignctl.core.sim.setup import Setup
from campaignctl.core.sim.tally import Tally
from campaignctl.core.sim.trials import SimSearch, bowl, outcome
from campaignctl.core.sim.workload import (
    Synthetic,
    Truth,
    WorkloadError,
    draw_truths,
    flaky_nodes,
    lemon_nodes,
    parse_synthetic,
    truths_of_trace,
)
from campaignctl.core.spec.clusters_spec import ClusterSpec
from campaignctl.core.spec.settings import campaign_settings
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.core.tick.right_size import UsageSample
from campaignctl.services.submit import load_spec

CAMPAIGN = "campaign"  # --policy campaign: the spec's own policy (the default, with the baseline)
UNPACKED = "+unpacked"  # --policy NAME+unpacked: that policy without the spec's pack:
SYNTHETIC = "synthetic:"

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class PolicyRun:
    policy: str
    tasks: int
    outcomes: dict[str, int]  # completed, given_up, stopped, or how the rest were left
    attempts: int
    makespan_h: float
    gpu_hours: float
    cpu_hours: float
    wasted_gpu_hours: float
    wasted_cpu_hours: float
    spend: float  # money at the campaign policy's prices
    ends: dict[str, int]  # runs by final Slurm state
    wasted_by_end: dict[str, float]  # wasted GPU-hours (CPU-hours without GPUs) by final Slurm state
    decisions: dict[str, int]  # "rule → action" carried out
    log_rows: int  # the decision log's rows for them (pending tasks resized alike share one)
    proposals: dict[str, int]  # shadow or waiting for approval: logged, not carried out
    ticks: int
    wasted_vs_baseline: float | None = None  # wasted hours ÷ the attempt-scaled run's
    search: dict[str, object] | None = None  # a search: its best value, and trials to come within 5 %
    decided: list[tuple[int, str, str]] = field(default_factory=list)  # (task, rule, action) when tracked
    lemon_gpu_hours: float = 0.0  # wasted on lemon nodes (workload lemons=N): failed runs, slowness's share


@dataclass(frozen=True, slots=True)
class SimulateResult:
    campaign: str
    workload: str
    seed: int
    cluster: str
    nodes: int
    tick_s: int
    budget: dict[str, float | None]
    runs: list[PolicyRun] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def simulate(spec_path: Path, policies: list[str], workload: str | None, seed: int,
             cluster_path: Path | None, tick_s: int = 300, progress: Progress | None = None,
             tracked: bool = False, clusters: int = 1) -> SimulateResult:
    """Each policy's run; `tracked` keeps every decision carried out (task, rule, action). With
    `clusters` above 1, that many copies of the cluster, the first kept busy by other users'
    queue for the workload's `busy` hours, and each policy run three ways: all on the first
    cluster, placed at submit, placed and moved (core/sim/clusters.py)."""
    spec, _ = load_spec(spec_path)
    if spec.rungs:
        raise InputError(f"{spec_path}: a progressive campaign (rungs) is not simulated yet",
                         "simulate a plain campaign: its rungs' metrics are not modelled")
    names = policies or ([CAMPAIGN] if spec.search else [CAMPAIGN, ATTEMPT_SCALED])
    if spec.search and any(name.split(":")[0] == ATTEMPT_SCALED for name in names):
        raise InputError(f"{spec_path}: the {ATTEMPT_SCALED} baseline asks no trials: a search is simulated "
                         "with policies only", "e.g. --policy campaign --policy conservative")
    chosen = [(name, _policy(name.removesuffix(UNPACKED), spec, spec_path)) for name in names]
    w, truths = _workload(workload, spec, seed)
    cluster = read_cluster(cluster_path) if cluster_path else default_cluster(spec.resources, spec.gpu_types)
    names_of = _cluster_names(spec, clusters)
    cluster = several(cluster, names_of) if names_of else cluster
    modes = MODES if names_of else ("",)  # several clusters: each policy three ways (core/sim/clusters.py)
    base = campaign_settings({**spec.settings(), "tasks": len(truths)})
    runs = []
    shape = _pack_shape(spec, w)
    for (name, policy), mode in ((c, m) for c in chosen for m in modes):
        setup = Setup(cluster, spec.resources, truths, w, seed, spec.max_parallel, tick_s,
                      flaky_nodes(w, len(cluster.nodes), seed), bool(policy and policy.slurm_requeue), track=tracked,
                      pack=None if name.endswith(UNPACKED) else shape, search=spec.search,
                      lemons=lemon_nodes(w, len(cluster.nodes), seed), clusters=names_of, placement=mode,
                      busy_jobs=busy_jobs(cluster, names_of, spec.resources, w.busy))
        settings = replace(base, clusters=tuple(ClusterSpec(n) for n in names_of) if mode == AND_MOVE else ())
        search = SimSearch(bowl(spec.search, seed)) if spec.search else None
        decider: Decider = (attempt_scaled_decider(_retries(name.removesuffix(UNPACKED))) if policy is None
                            else policy_decider(policy, settings, search, OptunaSampler() if search else None))
        label = f"{name} {mode}" if mode else name
        tick = (lambda done, total, n=label: progress(n, done, total)) if progress else None
        tally = Engine(setup, decider, tick).run()
        runs.append(_run(label, tally, spec.policy, outcome(search.trials()).to_dict() if search else None))
    where = str(cluster_path or "default")
    return SimulateResult(spec.name, workload or "synthetic:", seed,
                          f"{len(names_of)} × {where} ({', '.join(names_of)})" if names_of else where,
                          len(cluster.nodes), tick_s, _budget(spec), _ratios(runs))


def _cluster_names(spec: CampaignSpec, clusters: int) -> tuple[str, ...]:
    """The simulated clusters' names: the spec's `clusters:` (as many as asked), else c1, c2, …"""
    if clusters < 2:
        return ()
    named = [c.name for c in spec.clusters][:clusters]
    return (*named, *(f"c{i + 1}" for i in range(len(named), clusters)))


def _pack_shape(spec: CampaignSpec, w: Synthetic) -> PackShape | None:
    """The spec's `pack:` as submit would choose it: `auto` from the workload's `gpu_mem`,
    `gpu_util` and `cpu_util`, as if a first campaign had measured them on a 40 GiB GPU."""
    if spec.pack is None:
        return None
    total = 40_960.0
    measured = [UsageSample("simulated", "", "COMPLETED", None, None, spec.resources,
                            gpu_mem_mb=w.gpu_mem * total if w.gpu_mem else None, gpu_mem_total_mb=total,
                            gpu_util_pct=w.gpu_util or None, cpu_pct=w.cpu_util or None)] * MIN_SAMPLES
    return choose_shape(spec.pack, spec.resources, measured).shape


def _policy(name: str, spec: CampaignSpec, spec_path: Path) -> Policy | None:
    if name == CAMPAIGN:
        return spec.policy
    if name.split(":")[0] == ATTEMPT_SCALED:
        _retries(name)
        return None
    return load_policy(name, str(spec_path.resolve().parent))


def _retries(name: str) -> int:
    _, sep, n = name.partition(":")
    if not sep:
        return ATTEMPT_SCALED_RETRIES
    if not n.isdigit():
        raise InputError(f"--policy {name}: the retries after {ATTEMPT_SCALED}: must be a number",
                         f"e.g. --policy {ATTEMPT_SCALED}:3")
    return int(n)


def _workload(text: str | None, spec: CampaignSpec, seed: int) -> tuple[Synthetic, tuple[Truth, ...]]:
    r = spec.resources
    if text is None or text.startswith(SYNTHETIC):
        try:
            w = parse_synthetic((text or "")[len(SYNTHETIC):])
        except WorkloadError as e:
            raise InputError(f"--workload: {e}", "docs/simulate.md lists the synthetic keys") from None
        return w, draw_truths(w, w.tasks or len(spec.tasks), r.mem_mb, r.time_min, seed)
    # a trace says how each job ended; nothing more is drawn (no node failures, no preemptions)
    calm = Synthetic(oom=0, timeout=0, node_fail=0, preempt=0, exit=0, tempfail=0)
    return calm, truths_of_trace(read_trace(Path(text)), r)


def _budget(spec: CampaignSpec) -> dict[str, float | None]:
    b = spec.budget
    return {"gpu_hours": b.gpu_hours, "cpu_hours": b.cpu_hours, "money": b.money}


def _run(name: str, t: Tally, campaign_policy: Policy, search: dict[str, object] | None = None) -> PolicyRun:
    prices = campaign_policy.prices
    spend = sum(h * prices.gpu(None if kind == "any" else kind) for kind, h in t.gpu_hours_by_type.items())
    spend += t.cpu_hours * prices.cpu_hour
    return PolicyRun(name, t.tasks, dict(sorted(t.counts().items())), t.attempts, round(t.makespan_s / 3600, 2),
                     round(t.gpu_hours, 2), round(t.cpu_hours, 2), round(t.wasted_gpu_hours, 2),
                     round(t.wasted_cpu_hours, 2), round(spend, 2), dict(sorted(t.ends.items())),
                     {k: round(v, 2) for k, v in sorted(t.wasted_by_end.items())},
                     dict(sorted(t.decisions.items())), t.log_rows, dict(sorted(t.proposals.items())), t.ticks,
                     search=search, decided=list(t.decided), lemon_gpu_hours=round(t.lemon_gpu_hours, 2))


def _ratios(runs: list[PolicyRun]) -> list[PolicyRun]:
    """Each run's wasted hours ÷ the attempt-scaled baseline's (GPU-hours, or CPU-hours without GPUs)."""
    base = next((r for r in runs if r.policy.split(" ")[0].split(":")[0] == ATTEMPT_SCALED), None)
    if base is None:
        return runs
    out = []
    for r in runs:
        mine, theirs = (r.wasted_gpu_hours, base.wasted_gpu_hours) if base.gpu_hours else (
            r.wasted_cpu_hours, base.wasted_cpu_hours)
        out.append(PolicyRun(**{**asdict(r), "wasted_vs_baseline": round(mine / theirs, 3) if theirs else None}))
    return out
