#!/usr/bin/env python3
"""Benchmark how long `python app.py -m hydra/launcher=…` takes to return with campaignctl's
launcher, on the real local cluster (`scripts/slurmlab up` first; SLURM_CONF set), next to Hydra
alone composing the same sweep (`--cfg job`, which loads the config and exits) and a bare
`python -c pass`: medians and maxima of --repeat runs, alternating. Each launcher run submits a new
2 × 3 sweep (its seeds differ, so it is a new campaign) of tests/integration/hydra_app, then the
same command is run again ("submitted before": the re-run cost). Jobs are cancelled at the end.

Usage: .venv/bin/python scripts/bench_hydra.py [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench_hydra: {' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        sys.exit("bench_hydra: set SLURM_CONF to the lab's (eval \"$(scripts/slurmlab env)\")")
    work = Path(tempfile.mkdtemp(prefix="bench-hydra-"))
    shutil.copytree(REPO / "tests" / "integration" / "hydra_app", work / "app")
    app = work / "app" / "my_app.py"
    env = {**os.environ, "XDG_STATE_HOME": str(work / "state")}
    times: dict[str, list[float]] = {"python -c pass": [], "hydra --cfg job (compose only)": [],
                                     "launcher: submit a 2x3 sweep": [], "launcher: the same command again": []}
    try:
        for run in range(args.repeat):
            grid = ["optimizer.lr=0.1,0.001", f"seed={3 * run},{3 * run + 1},{3 * run + 2}"]
            times["python -c pass"].append(timed([sys.executable, "-c", "pass"], work, env))
            times["hydra --cfg job (compose only)"].append(timed([sys.executable, str(app), "--cfg", "job"], work, env))
            command = [sys.executable, str(app), "-m", "hydra/launcher=lab", *grid]
            times["launcher: submit a 2x3 sweep"].append(timed(command, app.parent, env))
            times["launcher: the same command again"].append(timed(command, app.parent, env))
    finally:
        # the sweeps' jobs (named cc.<token>.<campaign>): nothing else of this user's
        user_jobs = subprocess.run(["squeue", "--me", "-h", "-o", "%F %j"], capture_output=True, text=True).stdout
        ids = sorted({line.split()[0] for line in user_jobs.splitlines() if ".my_app-" in line})
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    figures = {k: {"median_s": round(statistics.median(v), 2), "max_s": round(max(v), 2), "runs": len(v)}
               for k, v in times.items()}
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"figures": figures, "load_1m": load}))
        return
    print(f"{'':40} {'median':>8} {'max':>8}   (runs: {args.repeat}, load {load:.2f})")
    for name, f in figures.items():
        print(f"{name:40} {f['median_s']:>7.2f}s {f['max_s']:>7.2f}s")


if __name__ == "__main__":
    main()
