#!/usr/bin/env python3
"""Benchmark, offline: how soon each sampler comes within 5 % of the optimum, against a grid of
the same size, over many drawn optima.

Each run is `campaignctl simulate` of a 24-trial search (4 at once) over 3 parameters (lr
log-uniform, width int, dropout uniform): the same tick as reconcile, on the simulated cluster,
over the simulator's synthetic objective (core/sim/trials.py: a bowl whose best value is 1, its
optimum drawn by the seed). The grid is a 4 × 3 × 2 `matrix:` over the same ranges, evaluated on
the same bowl (the points a person would write: lr 1e-5, 1e-4, 1e-3, 1e-2 (the range's first
decades); width 16, 136, 256; dropout 0.1, 0.4). The simulated cluster has no failures
(`synthetic:oom=0,...`), so every trial completes: the figures are about sampling only.

Prints, per sampler: on how many seeds the best came within 5 %, the median best, and the median
number of trials asked up to the first within 5 % (seeds that never got there left out).

Usage: .venv/bin/python scripts/bench_search.py [--seeds 10] [--trials 24] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from campaignctl.core.sim.trials import OPTIMUM, bowl  # noqa: E402
from campaignctl.core.spec.search_spec import SearchSpec  # noqa: E402
from campaignctl.services.simulate import simulate  # noqa: E402
from campaignctl.services.submit import load_spec  # noqa: E402

SAMPLERS = ("tpe", "random", "qmc", "cmaes")
QUIET = "synthetic:oom=0,timeout=0,exit=0,tempfail=0,node_fail=0,preempt=0,gpu_oom=0"
SPEC = """\
name: bench-search
command: [python, train.py, "{{lr}}", "{{width}}", "{{dropout}}"]
resources: {{gpus: 1, mem: 4G, time: "01:00:00"}}
search:
  sampler: {sampler}
  metric: val_loss
  trials: {trials}
  parallel: 4
  seed: {seed}
  space:
    lr: {{loguniform: [1.0e-5, 1.0e-1]}}
    width: {{int: [16, 256]}}
    dropout: {{uniform: [0.0, 0.5]}}
"""
GRID = {"lr": [1e-5, 1e-4, 1e-3, 1e-2], "width": [16, 136, 256], "dropout": [0.1, 0.4]}


def run(sampler: str, seed: int, trials: int, folder: Path) -> tuple[float, int | None]:
    spec = folder / f"{sampler}-{seed}.yaml"
    spec.write_text(SPEC.format(sampler=sampler, trials=trials, seed=seed))
    result = simulate(spec, [], QUIET, seed, None)
    search = result.runs[0].search or {}
    best, after = search.get("best"), search.get("within_5pct_after")
    return float(best) if isinstance(best, (int, float)) else float("inf"), after if isinstance(after, int) else None


def grid(search: SearchSpec, seed: int) -> tuple[float, int | None]:
    objective = bowl(search, seed)
    values = [objective.value(dict(zip(GRID, point, strict=True))) for point in itertools.product(*GRID.values())]
    after = next((i + 1 for i, v in enumerate(values) if v <= OPTIMUM * 1.05), None)
    return min(values), after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, int | None]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for seed in range(1, args.seeds + 1):
            for sampler in SAMPLERS:
                runs.setdefault(sampler, []).append(run(sampler, seed, args.trials, folder))
            search = load_spec(folder / f"tpe-{seed}.yaml")[0].search  # the grid's bowl is the search's
            assert search is not None
            runs.setdefault("grid 4×3×2", []).append(grid(search, seed))
            print(f"seed {seed}: " + ", ".join(f"{k} {v[-1][0]:.4f}" for k, v in runs.items()), file=sys.stderr)
    rows = {name: {"within_5pct": sum(1 for b, _ in got if b <= OPTIMUM * 1.05), "seeds": len(got),
                   "median_best": round(statistics.median(b for b, _ in got), 4),
                   "median_trials_to_5pct": statistics.median(a for _, a in got if a is not None)
                   if any(a is not None for _, a in got) else None}
            for name, got in runs.items()}
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{args.trials} trials, 4 at once, 3 parameters; {args.seeds} drawn optima (value 1); within 5 %: ≤ 1.05")
    print(f"{'sampler':<12} {'within 5 %':>10} {'median best':>12} {'median trials to 5 %':>21}")
    for name, row in rows.items():
        print(f"{name:<12} {row['within_5pct']:>5} of {row['seeds']:<2} {row['median_best']:>12} "
              f"{row['median_trials_to_5pct'] if row['median_trials_to_5pct'] is not None else '-':>21}")


if __name__ == "__main__":
    main()
