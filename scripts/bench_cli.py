#!/usr/bin/env python3
"""Benchmark how long `campaignctl --help` (and a few other quick answers) take to start, next to
a bare `python -c pass` of the same interpreter: medians of --repeat runs, alternating, and the
ratio. Each run is a fresh process (the installed entry point, as a shell starts it), its output
thrown away. Wall time, and CPU time (user + system of the child, from its rusage): on a shared,
loaded box the wall time waits for a core and the CPU time does not; the load is printed too.

Usage: .venv/bin/python scripts/bench_cli.py [--repeat 21] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENTRY = Path(sys.executable).with_name("campaignctl")
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "campaignctl --help": [str(ENTRY), "--help"],
    "campaignctl status --help": [str(ENTRY), "status", "--help"],
    "campaignctl --version": [str(ENTRY), "--version"],
}


def seconds(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():
        seconds(argv)  # warm the page cache and .pyc files; not counted
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():
            runs[name].append(seconds(argv))
    figures = {name: {kind: _median(r, i) for i, kind in enumerate(("wall_s", "cpu_s"))} for name, r in runs.items()}
    for f in figures.values():
        f["wall_ratio"] = round(f["wall_s"] / figures["python -c pass"]["wall_s"], 1)
        f["cpu_ratio"] = round(f["cpu_s"] / figures["python -c pass"]["cpu_s"], 1)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"repeat": args.repeat, "load_1min": load, "cpus": os.cpu_count(), "figures": figures}))
        return
    print(f"{args.repeat} runs each, load {load:.2f} on {os.cpu_count()} CPU(s)")
    for name, f in figures.items():
        print(f"  {name:28} wall {f['wall_s'] * 1000:6.0f} ms ({f['wall_ratio']:4.1f} x)   "
              f"cpu {f['cpu_s'] * 1000:6.0f} ms ({f['cpu_ratio']:4.1f} x python -c pass)")


def _median(runs: list[tuple[float, float]], which: int) -> float:
    return round(statistics.median(r[which] for r in runs), 4)


if __name__ == "__main__":
    main()
