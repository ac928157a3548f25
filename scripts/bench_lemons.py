#!/usr/bin/env python3
"""The node ledger's effect in the simulator (docs/nodes.md): the same seeded 10,000-task campaign
on 64 nodes × 8 A100s, two of them lemons, under the default policy with and without the ledger
(`nodes: {enabled: false}`), default failure mix, seeds 1-3. Prints per seed the GPU-hours wasted
on the lemon nodes (failed runs there, and the share slowness added to completed ones), the cut,
and the makespan of each side; then the medians.

    .venv/bin/python scripts/bench_lemons.py                            # lemons fail 90 % of attempts
    .venv/bin/python scripts/bench_lemons.py --lemon lemon_fail=0.5     # milder lemons
    .venv/bin/python scripts/bench_lemons.py --lemon lemon_fail=0,lemon_slow=3   # slow, never failing
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from campaignctl.services.simulate import simulate

SPEC = """\
name: lemons
command: ["python", "train.py", "--seed", "{seed}"]
matrix: {seed: [0]}
resources: {gpus: 1, gpu_type: a100, cpus_per_task: 4, mem: 16G, time: "04:00:00"}
"""
CLUSTER = "nodes:\n  - {name: \"gpu[01-64]\", cpus: 64, mem: 512G, gpus: 8, gpu_type: a100}\n"
POLICIES = {"ledger.yaml": "name: ledger\nuse: default\n",
            "no-ledger.yaml": "name: no-ledger\nuse: default\nnodes: {enabled: false}\n"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--lemons", type=int, default=2)
    parser.add_argument("--lemon", default="", help="more workload keys, e.g. lemon_fail=0.5,lemon_slow=2")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    workload = f"synthetic:tasks={args.tasks},lemons={args.lemons}" + (f",{args.lemon}" if args.lemon else "")
    cuts, ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "spec.yaml").write_text(SPEC)
        (folder / "cluster.yaml").write_text(CLUSTER)
        for name, text in POLICIES.items():
            (folder / name).write_text(text)
        print(f"workload {workload}, 64 nodes x 8 A100, default policy with and without the node ledger")
        print("seed | lemon GPU-h with / without | cut | makespan h with / without")
        for seed in range(1, args.seeds + 1):
            result = simulate(folder / "spec.yaml", [str(folder / n) for n in POLICIES], workload, seed,
                              folder / "cluster.yaml")
            with_ledger, without = result.runs
            cut = 1 - with_ledger.lemon_gpu_hours / without.lemon_gpu_hours if without.lemon_gpu_hours else 0.0
            cuts.append(cut)
            ratios.append(with_ledger.makespan_h / without.makespan_h)
            print(f"{seed} | {with_ledger.lemon_gpu_hours:.1f} / {without.lemon_gpu_hours:.1f} | {cut:.0%} | "
                  f"{with_ledger.makespan_h:.2f} / {without.makespan_h:.2f}")
    print(f"median cut {statistics.median(cuts):.0%} (goal >= 60 %); makespan with / without: median "
          f"{statistics.median(ratios):.3f}, max {max(ratios):.3f} (goal: not above 1)")


if __name__ == "__main__":
    main()
