#!/usr/bin/env python3
"""The simulator's figures (docs/simulate.md):

1. 100,000 simulated tasks under the default policy on 64 nodes × 8 A100s (goal ≤ 30 s, ≤ 1 GB),
   then on the default 8-node cluster where memory binds (goal ≤ 120 s): wall and CPU time, and
   the process's peak RSS so far; `--only big`: 1,000,000 (--big-tasks) on 64 × 8 (goal ≤ 600 s,
   ≤ 4 GB), each way in a process of its own (its peak RSS is that run's);
2. the default policy's wasted allocation ÷ the attempt-scaled baseline's on the same seeded
   synthetic workload, median of 3 seeds (goal ≤ 0.5, every task completed);
3. the demo campaign (templates/demo.yaml) simulated, its decisions by rule and action per task
   compared with those of the real-cluster demo (tests/fixtures/sim/demo_decisions.json);
4. the throttle case: 10,000 tasks (4 lr × 2,500 seeds, 1 GPU, 16G, 4 h, the default
   cluster, the failure mix, seed 3) without a throttle and with `array: {max_parallel: 512}`.
Every scale figure is measured both ways, without a throttle and with --max-parallel.

    .venv/bin/python scripts/bench_simulate.py [--tasks 100000] [--ratio-tasks 5000] [--seeds 5]
        [--max-parallel 512] [--throttle-tasks 10000] [--big-tasks 1000000] [--clusters 64x8,default]
        [--only scale|ratio|throttle|demo|big]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from campaignctl.services.simulate import simulate

REPO = Path(__file__).resolve().parent.parent
DEMO_FIXTURE = REPO / "tests" / "fixtures" / "sim" / "demo_decisions.json"
DEMO_TRACE = REPO / "tests" / "fixtures" / "sim" / "demo_trace.csv"
BENCH_SPEC = """\
name: bench-sim
command: ["python", "train.py", "--seed", "{seed}"]
matrix: {seed: [1]}
resources: {partition: batch, gpus: 1, gpu_type: a100, cpus_per_task: 2, mem: 4G, time: "02:00:00"}
policy: default
"""
# a GPU cluster of 64 nodes like the DGX A100 (8 GPUs, 128 cores, 1 TB): GPUs bind, not memory
BENCH_CLUSTER = """\
nodes:
  - {name: "gpu[001-064]", cpus: 128, mem: 1000G, gpus: 8, gpu_type: a100}
"""
RATIO_WORKLOAD = "synthetic:tasks={n},exit=0"  # no program bugs: every task can complete


def main() -> int:
    args = _args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "bench-sim.yaml"
        spec.write_text(BENCH_SPEC)
        capped = Path(tmp) / "bench-sim-capped.yaml"
        capped.write_text(BENCH_SPEC + f"array: {{max_parallel: {args.max_parallel}}}\n")
        cluster = Path(tmp) / "cluster.yaml"
        cluster.write_text(BENCH_CLUSTER)
        if args.way is not None:  # one way of the big run, in this process alone
            chosen, how = (spec, "no throttle") if args.way == "none" else (capped, f"max_parallel {args.max_parallel}")
            scale(chosen, args.big_tasks, cluster, f"64 nodes × 8 GPUs, {how}", 600, 4096)
            return 0
        if args.only in (None, "scale"):
            for each, how in ((spec, "no throttle"), (capped, f"max_parallel {args.max_parallel}")):
                if "64x8" in args.clusters:
                    scale(each, args.tasks, cluster, f"64 nodes × 8 GPUs, {how}", 30)
                if "default" in args.clusters:
                    scale(each, args.tasks, None, f"the default 8 nodes, {how}", 120)
        if args.only == "big":  # not part of a plain run: two runs of many minutes
            for way in ("none", "capped"):
                subprocess.run([sys.executable, __file__, "--way", way, "--big-tasks", str(args.big_tasks),
                                "--max-parallel", str(args.max_parallel)], check=True)
        if args.only in (None, "ratio"):
            ratio(spec, args.ratio_tasks, args.seeds)
        if args.only in (None, "throttle"):
            throttle(Path(tmp), args.throttle_tasks)
    return demo() if args.only in (None, "demo") else 0


THROTTLE_SPEC = """\
name: bench-throttle
command: ["python", "train.py", "--lr", "{{lr}}", "--seed", "{{seed}}"]
matrix: {{lr: [0.1, 0.01, 0.001, 0.0001], seed: {seeds}}}
resources: {{partition: batch, gpus: 1, cpus_per_task: 2, mem: 16G, time: "04:00:00"}}
policy: default
"""


def throttle(tmp: Path, tasks: int) -> None:
    """The throttle case, side by side: the same run without a throttle and with max_parallel 512."""
    walls = []
    for cap in ("", "array: {max_parallel: 512}\n"):
        spec = tmp / "throttle.yaml"
        spec.write_text(THROTTLE_SPEC.format(seeds=list(range(tasks // 4))) + cap)
        started, cpu = time.perf_counter(), time.process_time()
        run = simulate(spec, ["campaign"], f"synthetic:tasks={tasks}", 3, None).runs[0]
        walls.append(time.process_time() - cpu)
        print(f"throttle: {tasks} tasks, {cap.strip() or 'no throttle'}: {time.perf_counter() - started:.1f} s wall "
              f"({walls[-1]:.1f} s CPU; makespan {run.makespan_h:.0f} h, {run.attempts} attempts, {run.ticks} ticks)")
    print(f"throttle: max_parallel 512 costs {walls[1] / walls[0]:.2f}× the CPU time of no throttle "
          "(measured before the fix: 19×, 133 s against 7 s)")


def scale(spec: Path, tasks: int, cluster: Path | None, where: str, goal_s: float, goal_mb: float = 1024) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    result = simulate(spec, ["campaign"], f"synthetic:tasks={tasks}", 1, cluster)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run = result.runs[0]
    load = os.getloadavg()[0]
    print(f"scale: {tasks} tasks, default policy, {where}: {wall:.1f} s wall ({cpu:.1f} s CPU, "
          f"load average {load:.1f} on {os.cpu_count()} cores), peak RSS {rss_mb:.0f} MB "
          f"({run.attempts} attempts, {run.ticks} ticks, makespan {run.makespan_h:.0f} h, "
          f"{run.log_rows} decision-log rows; goal ≤ {goal_s:g} s and ≤ {goal_mb:g} MB: "
          f"{'met' if cpu <= goal_s and rss_mb <= goal_mb else 'NOT met'} by CPU time)", flush=True)


def ratio(spec: Path, tasks: int, seeds: int) -> None:
    ratios, completed = [], []
    for seed in range(1, seeds + 1):
        result = simulate(spec, ["campaign", "attempt-scaled"], RATIO_WORKLOAD.format(n=tasks), seed, None)
        mine, base = result.runs
        ratios.append(mine.wasted_vs_baseline or 0.0)
        completed.append((mine.outcomes.get("completed", 0), base.outcomes.get("completed", 0)))
        print(f"  seed {seed}: wasted GPU-h {mine.wasted_gpu_hours} vs {base.wasted_gpu_hours} "
              f"(ratio {mine.wasted_vs_baseline}); completed {completed[-1][0]} vs {completed[-1][1]} of {tasks}; "
              f"makespan {mine.makespan_h} h vs {base.makespan_h} h")
    median = statistics.median(ratios)
    everything = all(c == tasks for c, _ in completed)
    print(f"ratio: default ÷ attempt-scaled wasted GPU-hours, median of {seeds} seeds at {tasks} tasks: "
          f"{median:.2f} (goal ≤ 0.5 with every task completed: "
          f"{'met' if median <= 0.5 and everything else 'NOT met'})")


def demo() -> int:
    """Decisions (rule, action) per task: simulated demo vs the real-cluster demo's."""
    if not DEMO_FIXTURE.exists():
        print(f"demo: {DEMO_FIXTURE} is missing (see its README for how it was recorded)")
        return 1
    real = {(d["task"], d["rule"], d["action"]) for d in json.loads(DEMO_FIXTURE.read_text())["decisions"]}
    simulated = simulated_demo_decisions()
    agree = real == simulated
    print(f"demo: {len(simulated)} simulated decisions, {len(real)} on the real cluster: "
          f"{'the same (task, rule, action) set' if agree else 'DIFFERENT'}")
    for extra in sorted(simulated - real):
        print(f"  simulated only: {extra}")
    for missing in sorted(real - simulated):
        print(f"  real only: {missing}")
    return 0 if agree else 1


def simulated_demo_decisions() -> set[tuple[int, str, str]]:
    result = simulate(REPO / "templates" / "demo.yaml", ["campaign"], str(DEMO_TRACE), 1, None, tracked=True)
    return {(task, rule, action) for task, rule, action in result.runs[0].decided}


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=100_000)
    p.add_argument("--ratio-tasks", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--max-parallel", type=int, default=512, help="the throttle the scale runs are measured with too")
    p.add_argument("--throttle-tasks", type=int, default=10_000)
    p.add_argument("--big-tasks", type=int, default=1_000_000)
    p.add_argument("--clusters", default="64x8,default", help="the scale part's clusters: 64x8, default or both")
    p.add_argument("--only", choices=("scale", "ratio", "throttle", "demo", "big"), help="one part of the benchmark")
    p.add_argument("--way", choices=("none", "capped"), help=argparse.SUPPRESS)
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(main())
