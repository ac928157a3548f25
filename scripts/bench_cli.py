#!/usr/bin/env python3
"""Benchmark how long `campaignctl --help` (and a few other quick answers) take to start, next to
a bare `python -c pass` of the same interpreter: medians of --repeat runs, alternating, and the
ratio. Each run is a fresh process (the installed entry point, as a shell starts it), its output
thrown away. The machine's load is printed with the figures: on a shared box, compare ratios.

Usage: .venv/bin/python scripts/bench_cli.py [--repeat 21] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
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


def seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():
        seconds(argv)  # warm the page cache and .pyc files; not counted
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():
            runs[name].append(seconds(argv))
    base = statistics.median(runs["python -c pass"])
    figures = {name: {"median_s": round(statistics.median(r), 4), "ratio": round(statistics.median(r) / base, 1)}
               for name, r in runs.items()}
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"repeat": args.repeat, "load_1min": load, "cpus": os.cpu_count(), "figures": figures}))
        return
    print(f"{args.repeat} runs each, load {load:.2f} on {os.cpu_count()} CPU(s)")
    for name, f in figures.items():
        print(f"  {name:28} median {f['median_s'] * 1000:7.1f} ms   {f['ratio']:5.1f} x python -c pass")


if __name__ == "__main__":
    main()
