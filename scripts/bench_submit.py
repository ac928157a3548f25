#!/usr/bin/env python3
"""Benchmark `campaignctl submit` of a 2,500-task campaign (--tasks): sbatch calls, wall time and
the process's peak RSS.

Side by side in one run: a fake Slurm at the process boundary (MaxArraySize 1001 and a small
100, to show chunking), and — when SLURM_CONF points at a running cluster — the real
`scripts/slurmlab` cluster (its MaxArraySize; the arrays are cancelled right after submission).
Prints medians over --repeat runs. `--pack K,M`: K tasks to an element, M at a time as plain
processes (`pack: {per_job: K, processes: M}`); `--lift`: the spec's limits raised for the run
(tasks to 1,000,000, its size to 64 MiB), to measure a submit larger than a spec may be today.

Usage: .venv/bin/python scripts/bench_submit.py [--repeat 5] [--tasks 2500] [--pack 500,16] [--lift] [--fake-only]
Example (the 100,000-task figure of docs/performance.md):
    .venv/bin/python scripts/bench_submit.py --tasks 100000 --pack 500,16 --repeat 3 --fake-only
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from campaignctl.adapters import proc, slurm, yaml_source
from campaignctl.core.model import params
from campaignctl.services.submit import submit
from tests.fakeslurm import FakeSlurm


def write_spec(directory: Path, name: str, tasks: int, pack: tuple[int, int] | None) -> Path:
    seeds = ", ".join(str(i) for i in range(tasks))
    path = directory / "bench.yaml"
    packed = f"pack: {{per_job: {pack[0]}, processes: {pack[1]}}}\n" if pack else ""
    path.write_text(f"name: {name}\ncommand: [\"true\", \"{{seed}}\"]\nmatrix: {{seed: [{seeds}]}}\n"
                    "resources: {mem: 100M, time: \"00:01:00\"}\narray: {max_parallel: 8}\n" + packed)
    return path


def one_run(mode: str, max_array: int | None, tasks: int, pack: tuple[int, int] | None) -> tuple[int, float]:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        spec = write_spec(Path(tmp), f"bench-{mode}", tasks, pack)
        fake = FakeSlurm(max_array_size=max_array) if max_array else None
        proc.EXECUTOR = fake or proc.subprocess_executor
        slurm.forget_site()  # each run its own Slurm: MaxArraySize and --test-only answers are per process
        started = time.perf_counter()
        result = submit(spec)
        elapsed = time.perf_counter() - started
        if fake is None:
            for chunk in result.chunks:
                slurm.cancel(chunk.job_id or "")
        return result.sbatch_calls, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=2500)
    parser.add_argument("--pack", help="K,M: K tasks to an element, M at a time as plain processes")
    parser.add_argument("--lift", action="store_true", help="raise the spec's limits for this run")
    parser.add_argument("--fake-only", action="store_true", help="not the real cluster, even with SLURM_CONF set")
    args = parser.parse_args()
    pack = tuple(int(n) for n in args.pack.split(",")) if args.pack else None
    if args.lift:
        params.MAX_TASKS, yaml_source.MAX_BYTES, yaml_source._MAX_NODES = 1_000_000, 64 * 2**20, 5_000_000
    modes: list[tuple[str, int | None]] = [("fake-1001", 1001), ("fake-100", 100)]
    if os.environ.get("SLURM_CONF") and not args.fake_only:
        modes.append(("real", None))
    print(f"{'mode':<10} {'MaxArraySize':>12} {'tasks':>8} {'sbatch':>7} {'expected':>8} {'median s':>9} {'runs':>5} "
          f"{'peak RSS MB':>12}")
    for mode, max_array in modes:
        proc.EXECUTOR = proc.subprocess_executor
        size = max_array or slurm.max_array_size()
        runs = [one_run(mode, max_array, args.tasks, pack) for _ in range(args.repeat)]
        calls = {c for c, _ in runs}
        expected = math.ceil(args.tasks / (size * (pack[0] if pack else 1)))
        assert calls == {expected}, (mode, calls)
        median = statistics.median(t for _, t in runs)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"{mode:<10} {size:>12} {args.tasks:>8} {calls.pop():>7} {expected:>8} "
              f"{median:>9.2f} {args.repeat:>5} {peak:>12}")


if __name__ == "__main__":
    main()
