"""What each simulated task really needs and how its attempts end: drawn from `synthetic:KEY=V,...`
with one seeded `random.Random`, or read from a trace's rows. Pure.

A task's truth (memory need, run time, which failures it carries) is drawn once per task, in task
order, so every policy compared on one seed runs the very same tasks; the chance events of one
attempt (where an OOM strikes, a node failure, a preemption) come from a generator seeded by
(seed, task, attempt), so they too are the same for every policy that reaches that attempt."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from campaignctl.core.model.params import MAX_TASKS
from campaignctl.core.policy.output_causes import GPU_HARDWARE, GPU_OOM
from campaignctl.core.resources import Resources

# key → (default, what it means); docs/simulate.md lists the same table
SYNTHETIC_KEYS: Mapping[str, tuple[float, str]] = {
    "tasks": (0, "number of tasks (0: the spec's)"),
    "mem_mean": (0, "mean memory need in MB (0: 0.8 × the spec's mem request)"),
    "mem_sd": (0, "standard deviation of the memory need in MB (0: 0.25 × mem_mean)"),
    "dur_mean": (0, "mean run time in minutes (0: 0.5 × the spec's time limit)"),
    "dur_sd": (0, "standard deviation of the run time in minutes (0: 0.3 × dur_mean)"),
    "oom": (0.1, "extra share of tasks whose memory need is drawn above the request (1.1-2.5×)"),
    "timeout": (0.05, "extra share of tasks whose run time is drawn above the limit (1.1-2.5×)"),
    "node_fail": (0.01, "chance an attempt's node fails while it runs (flaky nodes only)"),
    "bad_nodes": (0.1, "share of nodes that are flaky (at least one)"),
    "node_down": (10, "minutes a failed node stays down"),
    "preempt": (0.02, "chance a higher-priority job preempts an attempt while it runs"),
    "preemptor_min": (30, "minutes a preempting job holds the node's resources"),
    "exit": (0.01, "share of tasks with a bug: every attempt FAILED exit 1"),
    "tempfail": (0.02, "share of tasks whose first attempt exits 75 (EX_TEMPFAIL)"),
    "gpu_oom": (0.0, "share of tasks whose first attempts end with a GPU out-of-memory error"),
    "submit_spread": (0, "minutes over which the tasks are submitted (0: all at once)"),
    "gpu_mem": (0.0, "share of its GPU's memory a task holds, what `pack: auto` packs by (0: not measured)"),
    "gpu_util": (0.0, "a task's mean GPU utilisation in % (0: not measured)"),
    "cpu_util": (0.0, "a task's mean CPU use in % of one CPU, what a pack's CPUs are sized by (0: not measured)"),
    "lemons": (0, "number of lemon nodes: GPU hardware errors and slowness (0: none)"),
    "lemon_fail": (0.9, "chance an attempt on a lemon ends in a GPU hardware error (an Xid)"),
    "lemon_slow": (1.0, "how many times slower a lemon runs an attempt (1: not slower)"),
    "busy": (0, "with --clusters: hours other users' queue keeps the first cluster full before the campaign"),
}


TRACE_COLUMNS = ("submit_s", "duration_s", "gpus", "cpus", "mem_mb", "final_state", "time_min", "max_rss_mb")
TRACE_STATES = ("COMPLETED", "FAILED", "OUT_OF_MEMORY", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED")
TRACE_OOM_NEED = 1.5  # an OUT_OF_MEMORY row without max_rss_mb needed this × its request
TRACE_TIMEOUT_RUN = 1.5  # a TIMEOUT row needed this × its limit


# tasks: a spec's most (MAX_TASKS). A simulation holds every task's truth and attempts in memory:
# 100,000 tasks peak near 260 MB; 3e6 ran out of memory
# the largest value of each unbounded key: an hour-long mean is 60, a 64 TiB mean 6.7e7 MB
MAX_VALUE = {"tasks": MAX_TASKS, "mem_mean": 64 * 2**20, "mem_sd": 64 * 2**20, "dur_mean": 525_600,
             "dur_sd": 525_600, "node_down": 525_600, "preemptor_min": 525_600, "submit_spread": 525_600,
             "gpu_util": 100, "cpu_util": 100_000, "lemons": 100_000, "lemon_slow": 100, "busy": 8760}


class WorkloadError(ValueError):
    """A `synthetic:` key or value is not understood."""


@dataclass(frozen=True, slots=True)
class Synthetic:
    tasks: int = 0
    mem_mean: float = 0
    mem_sd: float = 0
    dur_mean: float = 0
    dur_sd: float = 0
    oom: float = 0.1
    timeout: float = 0.05
    node_fail: float = 0.01
    bad_nodes: float = 0.1
    node_down: float = 10
    preempt: float = 0.02
    preemptor_min: float = 30
    exit: float = 0.01
    tempfail: float = 0.02
    gpu_oom: float = 0.0
    submit_spread: float = 0
    gpu_mem: float = 0.0
    gpu_util: float = 0.0
    cpu_util: float = 0.0
    lemons: float = 0
    lemon_fail: float = 0.9
    lemon_slow: float = 1.0
    busy: float = 0


@dataclass(frozen=True, slots=True)
class Truth:
    """One task as it really is (what the policy has to find out)."""

    submit_s: int  # seconds after the start when the task is submitted
    mem_mb: int  # peak memory it needs
    run_s: int  # run time it needs, start to finish, on any node
    bug: bool = False  # FAILED exit 1 every attempt
    tempfail: bool = False  # the first attempt exits 75
    gpu_oom: bool = False  # GPU OOM until its parameters change or it moves GPU type
    request: tuple[int, int, int, int] | None = None  # a trace's (gpus, CPUs, mem MB, time min); None: the spec's


@dataclass(frozen=True, slots=True)
class Hazards:
    """The chance events an attempt meets, as fractions of its planned run (None: none)."""

    oom_at: float  # where a too-small memory request gets killed
    node_fail_at: float | None
    preempt_at: float | None
    fail_at: float  # where a bug or GPU OOM ends it
    hardware_at: float | None = None  # where a lemon's GPU fails it


def parse_synthetic(text: str) -> Synthetic:
    """`tasks=1000,oom=0.1` → Synthetic (unknown keys and bad numbers raise WorkloadError)."""
    values: dict[str, Any] = {}  # each checked below: a finite number in its key's range
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in SYNTHETIC_KEYS:
            raise WorkloadError(f"unknown synthetic workload key {key!r}; allowed: {', '.join(SYNTHETIC_KEYS)}")
        try:
            number = float(value)
        except ValueError:
            raise WorkloadError(f"synthetic workload key {key}: {value!r} is not a number") from None
        if not math.isfinite(number) or number < 0 or number > MAX_VALUE.get(key, 1):
            raise WorkloadError(f"synthetic workload key {key}: {value} is out of range "
                                f"(0 to {MAX_VALUE.get(key, 1):,})")
        values[key] = int(number) if key == "tasks" else number
    return Synthetic(**values)


def draw_truths(w: Synthetic, tasks: int, mem_request_mb: int, time_limit_min: int,
                seed: int) -> tuple[Truth, ...]:
    """Every task's truth, from one generator seeded by `seed`, in task order."""
    rng = random.Random(seed)
    mem_mean = w.mem_mean or 0.8 * mem_request_mb
    mem_sd = w.mem_sd or 0.25 * mem_mean
    dur_mean = (w.dur_mean or 0.5 * time_limit_min) * 60
    dur_sd = (w.dur_sd * 60) or 0.3 * dur_mean
    limit_s = time_limit_min * 60
    out = []
    for _ in range(tasks):
        mem = max(1.0, rng.gauss(mem_mean, mem_sd))
        if rng.random() < w.oom:
            mem = max(mem, mem_request_mb * rng.uniform(1.1, 2.5))
        run = max(60.0, rng.gauss(dur_mean, dur_sd))
        if rng.random() < w.timeout:
            run = max(run, limit_s * rng.uniform(1.1, 2.5))
        submit = rng.uniform(0, w.submit_spread * 60)
        out.append(Truth(int(submit), int(mem), int(run), rng.random() < w.exit, rng.random() < w.tempfail,
                         rng.random() < w.gpu_oom))
    return tuple(sorted(out, key=lambda t: t.submit_s)) if w.submit_spread else tuple(out)


def hazards(w: Synthetic, seed: int, task: int, attempt: int, start: int, flaky_node: bool,
            lemon: bool = False) -> Hazards:
    """The chance events of an attempt's `start`-th run (a requeued job runs again); a str seed
    is hashed with SHA-512: stable across runs and Python versions. A lemon's draw comes after
    the others: a run without lemons draws what it drew before they existed."""
    rng = random.Random(f"{seed}:{task}:{attempt}:{start}")
    oom_at, fail_at = rng.uniform(0.05, 0.6), rng.uniform(0.02, 0.3)
    node = rng.uniform(0, 1) if flaky_node and rng.random() < w.node_fail / max(w.bad_nodes, 1e-9) else None
    preempt = rng.uniform(0, 1) if rng.random() < w.preempt else None
    hardware = rng.uniform(0.02, 0.5) if lemon and rng.random() < w.lemon_fail else None
    return Hazards(oom_at, node, preempt, fail_at, hardware)


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One job of a trace CSV (docs/simulate.md: the schema and how Philly or PAI convert to it)."""

    submit_s: int
    duration_s: int
    gpus: int
    cpus: int | None  # None: the spec's
    mem_mb: int | None
    final_state: str
    time_min: int | None = None
    max_rss_mb: int | None = None


def truths_of_trace(rows: Sequence[TraceRow], r: Resources) -> tuple[Truth, ...]:
    """A trace's jobs as tasks: each asks what its row asked; what it needs follows its end state
    (OUT_OF_MEMORY needs more than it asked, TIMEOUT runs past its limit, FAILED is a bug;
    NODE_FAIL, PREEMPTED and CANCELLED rows run to their duration: a trace run draws no chance events)."""
    start = min((row.submit_s for row in rows), default=0)
    out = []
    for row in sorted(rows, key=lambda x: x.submit_s):
        cpus, mem, limit = row.cpus or r.cpus_per_task, row.mem_mb or r.mem_mb, row.time_min or r.time_min
        need = row.max_rss_mb or int(mem * (TRACE_OOM_NEED if row.final_state == "OUT_OF_MEMORY" else 0.8))
        if row.final_state == "OUT_OF_MEMORY":
            need = max(need, mem + 1)
        run = max(1, row.duration_s)
        if row.final_state == "TIMEOUT":
            run = max(run, int(limit * 60 * TRACE_TIMEOUT_RUN))
        out.append(Truth(row.submit_s - start, need, run, bug=row.final_state == "FAILED",
                         request=(row.gpus, cpus, mem, limit)))
    return tuple(out)


def flaky_nodes(w: Synthetic, nodes: int, seed: int) -> frozenset[int]:
    """Which nodes fail (bad_nodes of them, at least one when node_fail > 0), drawn from the seed."""
    if not w.node_fail or not nodes:
        return frozenset()
    rng = random.Random(f"{seed}:nodes")
    return frozenset(rng.sample(range(nodes), max(1, round(w.bad_nodes * nodes))))


def lemon_nodes(w: Synthetic, nodes: int, seed: int) -> frozenset[int]:
    """Which nodes are lemons (`lemons` of them), drawn from the seed."""
    count = min(int(w.lemons), nodes)
    return frozenset(random.Random(f"{seed}:lemons").sample(range(nodes), count)) if count else frozenset()


def fate(truth: Truth, r: Resources, attempt: int, params_changed: bool, first_gpu_type: str | None,
         hz: Hazards) -> tuple[int, str, int, str | None]:
    """(seconds it runs, final state, exit code, cause named by the output) of one start of a
    task with `truth`, asking `r`: a GPU OOM strikes while the task runs its first attempt's
    GPU type and parameters (a rule that changed either cured it); a lemon's GPU error strikes
    if it comes before the end the rest would give."""
    end, state, code, cause = _fate(truth, r, attempt, params_changed, first_gpu_type, hz)
    if hz.hardware_at is not None and (at := max(1, int(hz.hardware_at * min(truth.run_s, r.time_min * 60)))) < end:
        return at, "FAILED", 1, GPU_HARDWARE
    return end, state, code, cause


def _fate(truth: Truth, r: Resources, attempt: int, params_changed: bool, first_gpu_type: str | None,
          hz: Hazards) -> tuple[int, str, int, str | None]:
    limit = r.time_min * 60
    run = min(truth.run_s, limit)
    if truth.mem_mb > r.mem_mb:
        return max(1, int(hz.oom_at * run)), "OUT_OF_MEMORY", 0, None
    if truth.gpu_oom and not params_changed and r.gpu_type == first_gpu_type:
        return max(1, int(hz.fail_at * run)), "FAILED", 1, GPU_OOM
    if truth.bug or (truth.tempfail and attempt == 1):
        return max(1, int(hz.fail_at * run)), "FAILED", 1 if truth.bug else 75, None
    if truth.run_s > limit:
        return limit, "TIMEOUT", 0, None
    return truth.run_s, "COMPLETED", 0, None
