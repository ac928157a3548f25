#!/usr/bin/env python3
"""Benchmark on the local real cluster: a TPE search, a random search and a grid of the same size
over the same 3 parameters of the toy trainer, one after the other in one run.

The trainer (tests/integration/toy_trainer.py --dropout) reports a val_loss that is a known
function of lr, width and dropout: 1 at lr 3e-3, width 96, dropout 0.1, plus each parameter's
squared distance from there as a fraction of its range. Each campaign runs 24 trials, 4 at once,
every trial 1 GPU for `--steps` one-second steps, reconciled every 3 s from this process:
  - `search: {sampler: tpe, seed: 1}` and `search: {sampler: random, seed: 1}` over lr
    log-uniform 1e-5..1e-1, width int 16..256, dropout uniform 0..0.5;
  - a 4 × 3 × 2 `matrix:` over the same ranges (lr 1e-5, 1e-4, 1e-3, 1e-2; width 16, 136, 256;
    dropout 0.1, 0.4), `array: {max_parallel: 4}`.
Prints for each: the best val_loss, how many trials had ended when the first one within 5 % of
the optimum ended (never: -), and the GPU-hours Slurm allocated (campaignctl's spend: sacct
Elapsed × AllocTRES).

Usage: SLURM_CONF=... .venv/bin/python scripts/bench_search_real.py [--steps 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from campaignctl.adapters.metrics_store import MetricsStore  # noqa: E402
from campaignctl.adapters.store import Store  # noqa: E402
from campaignctl.core.model.training_metrics import final_value  # noqa: E402
from campaignctl.services.reconcile import reconcile  # noqa: E402
from campaignctl.services.status import status  # noqa: E402
from campaignctl.services.submit import submit  # noqa: E402

TOY = ROOT / "tests" / "integration" / "toy_trainer.py"
OPTIMUM = 1.0
HEAD = """\
name: {name}
command: [{python}, {toy}, "{{lr}}", "{{width}}", --dropout, "{{dropout}}", --steps, "{steps}", --gpu-mb, "100"]
resources: {{gpus: 1, cpus_per_task: 1, mem: 200M, time: "00:05:00"}}
telemetry: {{interval: 0}}
"""
SEARCH = """\
search:
  sampler: {sampler}
  metric: val_loss
  trials: 24
  parallel: 4
  seed: 1
  space:
    lr: {{loguniform: [1.0e-5, 1.0e-1]}}
    width: {{int: [16, 256]}}
    dropout: {{uniform: [0.0, 0.5]}}
"""
GRID = """\
objective: {metric: val_loss, goal: min}
matrix: {lr: [1.0e-5, 1.0e-4, 1.0e-3, 1.0e-2], width: [16, 136, 256], dropout: [0.1, 0.4]}
array: {max_parallel: 4}
"""


def run(label: str, body: str, steps: int, folder: Path) -> dict[str, object]:
    name = f"bench-{label.split()[0]}-{uuid.uuid4().hex[:6]}"
    spec = folder / f"{name}.yaml"
    spec.write_text(HEAD.format(name=name, python=sys.executable, toy=TOY, steps=steps) + body)
    started = time.monotonic()
    submit(spec)
    store = Store.open()
    while True:
        reconcile(name)
        record = store.campaign(name)
        assert record is not None
        if record.state == "finished":
            break
        if time.monotonic() - started > 1800:
            raise SystemExit(f"{name}: not finished after 30 min")
        time.sleep(3)
    curves = MetricsStore(store.engine).curves(record.id, "val_loss")
    ended = sorted((r.ended_at or "", r.task_index) for r in store.history(record.id) if r.state == "COMPLETED")
    values = {task: v for task, curve in curves.items() if (v := final_value(curve)) is not None}
    reached = next((i + 1 for i, (_, task) in enumerate(ended) if values.get(task, 9e9) <= OPTIMUM * 1.05), None)
    spend = status(name).spend
    gpu_hours = spend.spent.get("gpu_hours", 0.0) if spend else 0.0
    return {"run": label, "trials": len(values), "best": round(min(values.values()), 4),
            "ended_before_within_5pct": reached, "gpu_hours": round(gpu_hours, 4),
            "makespan_s": round(time.monotonic() - started)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("SLURM_CONF is not set: bring the lab up first (eval \"$(scripts/slurmlab up)\")")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("XDG_STATE_HOME", str(Path(tmp) / "state"))
        for label, body in (("tpe", SEARCH.format(sampler="tpe")), ("random", SEARCH.format(sampler="random")),
                            ("grid 4×3×2", GRID)):
            rows.append(run(label, body, args.steps, Path(tmp)))
            print(f"{label}: {rows[-1]}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("24 trials each, 4 at once; the optimum is 1; within 5 %: ≤ 1.05")
    print(f"{'run':<12} {'best':>7} {'trials ended before within 5 %':>31} {'GPU-h':>8} {'makespan':>9}")
    for r in rows:
        reached = r["ended_before_within_5pct"] if r["ended_before_within_5pct"] is not None else "never"
        print(f"{r['run']:<12} {r['best']:>7} {reached:>31} {r['gpu_hours']:>8} {r['makespan_s']:>8}s")


if __name__ == "__main__":
    main()
