#!/usr/bin/env python3
"""The default policy against the attempt-scaled baseline on the same drawn workloads
(docs/simulate.md, "Time-to-result"): a 10,000-task campaign (4 lr × 2,500 seeds; 1 GPU, 4 CPUs,
16G, 4 h) on a memory-bound cluster (the default: 8 nodes that each fit exactly 8 tasks, so any
memory raise costs a slot) and on a GPU-bound one (8 nodes of 8 GPUs, 128 cores, 1000G), seeds
1-3, with the default failure mix and with `exit=0` (no program bugs). Per run: completions,
makespan and wasted GPU-hours of each, their ratios, and the default policy's decision log rows
per task.
Goals: makespan ≤ 1.0×, waste ≤ 0.5×, no fewer completions, ≤ 2 log rows per task.

    .venv/bin/python scripts/bench_policy.py [--tasks 10000] [--seeds 1 2 3] [--policy default]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from campaignctl.services.simulate import simulate

GPU_BOUND = """\
nodes:
  - {name: "node[1-8]", cpus: 128, mem: 1000G, gpus: 8, gpu_type: gpu}
"""


def spec_text(tasks: int) -> str:
    seeds = max(1, tasks // 4)
    return ("name: sweep\ncommand: [python3, train.py, --lr, \"{lr}\", --seed, \"{seed}\"]\n"
            "matrix:\n  lr: [0.1, 0.03, 0.01, 0.003]\n"
            f"  seed: [{', '.join(str(i) for i in range(seeds))}]\n"
            "resources: {gpus: 1, cpus_per_task: 4, mem: 16G, time: \"04:00:00\"}\n")


def main() -> int:
    args = _args()
    print(f"{'cluster':<13}{'mix':<9}{'seed':>4}  {'completed':>11}  {'makespan h':>15}  {'ratio':>6}  "
          f"{'wasted GPU-h':>15}  {'ratio':>6}  {'rows/task':>9}  {'s':>5}", flush=True)
    worst = {"makespan": 0.0, "waste": 0.0, "rows": 0.0}
    fewer = 0
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "sweep.yaml"
        spec.write_text(spec_text(args.tasks))
        gpu_bound = Path(tmp) / "gpu-bound.yaml"
        gpu_bound.write_text(GPU_BOUND)
        for cluster_name, cluster in (("memory-bound", None), ("gpu-bound", gpu_bound)):
            for mix, workload in (("default", f"synthetic:tasks={args.tasks}"),
                                  ("exit=0", f"synthetic:tasks={args.tasks},exit=0")):
                for seed in args.seeds:
                    started = time.perf_counter()
                    result = simulate(spec, [args.policy, "attempt-scaled"], workload, seed, cluster)
                    mine, base = result.runs
                    done, done_base = mine.outcomes.get("completed", 0), base.outcomes.get("completed", 0)
                    mk, waste = mine.makespan_h / base.makespan_h, mine.wasted_gpu_hours / base.wasted_gpu_hours
                    # a campaignctl from before the log's shared rows (PYTHONPATH=<older checkout>): one per decision
                    decisions = getattr(mine, "log_rows", sum(mine.decisions.values())) / mine.tasks
                    worst = {"makespan": max(worst["makespan"], mk), "waste": max(worst["waste"], waste),
                             "rows": max(worst["rows"], decisions)}
                    fewer += done < done_base
                    print(f"{cluster_name:<13}{mix:<9}{seed:>4}  {done:>5}/{done_base:<5}  "
                          f"{mine.makespan_h:>7.0f}/{base.makespan_h:<7.0f}  {mk:>5.3f}  "
                          f"{mine.wasted_gpu_hours:>7.0f}/{base.wasted_gpu_hours:<7.0f}  {waste:>5.3f}  "
                          f"{decisions:>9.2f}  {time.perf_counter() - started:>5.0f}", flush=True)
    print(f"worst makespan ratio {worst['makespan']:.3f} (goal ≤ 1.0), worst waste ratio {worst['waste']:.3f} "
          f"(goal ≤ 0.5), most log rows per task {worst['rows']:.2f} (goal ≤ 2), "
          f"runs with fewer completions: {fewer} (goal 0)")
    return 0 if worst["makespan"] <= 1.0 and worst["waste"] <= 0.5 and worst["rows"] <= 2 and not fewer else 1


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--policy", default="default", help="built-in name or policy file (default: default)")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
