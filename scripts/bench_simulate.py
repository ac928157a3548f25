#!/usr/bin/env python3
"""The simulator's figures (docs/simulate.md):

1. 100,000 simulated tasks under the default policy on 64 nodes × 8 A100s (goal ≤ 60 s, ≤ 1 GB),
   then on the default 8-node cluster where memory binds (goal ≤ 120 s): wall and CPU time, and
   the process's peak RSS so far;
2. the default policy's wasted allocation ÷ the attempt-scaled baseline's on the same seeded
   synthetic workload, median of 3 seeds (goal ≤ 0.5, every task completed);
3. the demo campaign (templates/demo.yaml) simulated, its decisions by rule and action per task
   compared with those of the real-cluster demo (tests/fixtures/sim/demo_decisions.json).

    .venv/bin/python scripts/bench_simulate.py [--tasks 100000] [--ratio-tasks 5000] [--seeds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
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
        cluster = Path(tmp) / "cluster.yaml"
        cluster.write_text(BENCH_CLUSTER)
        scale(spec, args.tasks, cluster, "64 nodes × 8 GPUs", 60)
        scale(spec, args.tasks, None, "the default 8 nodes", 120)
        ratio(spec, args.ratio_tasks, args.seeds)
    return demo()


def scale(spec: Path, tasks: int, cluster: Path | None, where: str, goal_s: float) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    result = simulate(spec, ["campaign"], f"synthetic:tasks={tasks}", 1, cluster)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run = result.runs[0]
    load = os.getloadavg()[0]
    print(f"scale: {tasks} tasks, default policy, {where}: {wall:.1f} s wall ({cpu:.1f} s CPU, "
          f"load average {load:.1f} on {os.cpu_count()} cores), peak RSS {rss_mb:.0f} MB "
          f"({run.attempts} attempts, {run.ticks} ticks, makespan {run.makespan_h:.0f} h, "
          f"{run.log_rows} decision-log rows; goal ≤ {goal_s:g} s and ≤ 1024 MB: "
          f"{'met' if cpu <= goal_s and rss_mb <= 1024 else 'NOT met'} by CPU time)")


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
    return p.parse_args()


if __name__ == "__main__":
    sys.exit(main())
