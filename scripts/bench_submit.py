#!/usr/bin/env python3
"""Benchmark `campaignctl submit` of a 2,500-task campaign: sbatch calls and wall time.

Side by side in one run: a fake Slurm at the process boundary (MaxArraySize 1001 and a small
100, to show chunking), and — when SLURM_CONF points at a running cluster — the real
`scripts/slurmlab` cluster (its MaxArraySize; the arrays are cancelled right after submission).
Prints medians over --repeat runs.  Usage: .venv/bin/python scripts/bench_submit.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from campaignctl.adapters import proc, slurm
from campaignctl.services.submit import submit
from tests.fakeslurm import FakeSlurm

TASKS = 2500


def write_spec(directory: Path, name: str) -> Path:
    seeds = ", ".join(str(i) for i in range(TASKS))
    path = directory / "bench.yaml"
    path.write_text(f"name: {name}\ncommand: [\"true\", \"{{seed}}\"]\nmatrix: {{seed: [{seeds}]}}\n"
                    "resources: {mem: 100M, time: \"00:01:00\"}\narray: {max_parallel: 8}\n")
    return path


def one_run(mode: str, max_array: int | None) -> tuple[int, float]:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        spec = write_spec(Path(tmp), f"bench-{mode}")
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
    args = parser.parse_args()
    modes: list[tuple[str, int | None]] = [("fake-1001", 1001), ("fake-100", 100)]
    if os.environ.get("SLURM_CONF"):
        modes.append(("real", None))
    print(f"{'mode':<10} {'MaxArraySize':>12} {'tasks':>6} {'sbatch':>7} {'expected':>8} {'median s':>9} {'runs':>5}")
    for mode, max_array in modes:
        proc.EXECUTOR = proc.subprocess_executor
        size = max_array or slurm.max_array_size()
        runs = [one_run(mode, max_array) for _ in range(args.repeat)]
        calls = {c for c, _ in runs}
        assert calls == {math.ceil(TASKS / size)}, (mode, calls)
        median = statistics.median(t for _, t in runs)
        print(f"{mode:<10} {size:>12} {TASKS:>6} {calls.pop():>7} {math.ceil(TASKS / size):>8} "
              f"{median:>9.2f} {args.repeat:>5}")


if __name__ == "__main__":
    main()
