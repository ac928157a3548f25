#!/usr/bin/env python3
"""Benchmark: GPU-hours of a progressive campaign (rungs) vs every config at full size.

Runs on the local real cluster (`scripts/slurmlab up`, SLURM_CONF set), side by side, --repeat
times, alternating: the same 16 configs of templates/progressive_train.py
  - with rungs: screen 4 steps on 1 GPU → best 1/4 to 12 steps on 1 GPU → best 1/2 to 36 steps
    on 2 GPUs, each promoted config resuming from its checkpoint;
  - at full size: all 16 configs, 36 steps on 2 GPUs.
GPU-hours are what campaignctl's budget accounting says was spent (sacct Elapsed × the GPUs
Slurm allocated, AllocTRES), after reconcile ticks every 2 s until the campaign finishes. It
also prints the GPU-step ratio (steps × GPUs actually trained), which leaves out job start-up,
and which config each way found best. Medians over the repeats.

Usage: .venv/bin/python scripts/bench_rungs.py [--repeat 3] [--step-time 0.25] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from campaignctl.adapters.metrics_store import MetricsStore  # noqa: E402
from campaignctl.adapters.store import Store  # noqa: E402
from campaignctl.services.reconcile import reconcile  # noqa: E402
from campaignctl.services.status import status  # noqa: E402
from campaignctl.services.submit import submit  # noqa: E402

TOY = ROOT / "templates" / "progressive_train.py"
CONFIGS = 16
SEEDS = ", ".join(map(str, range(CONFIGS)))
COMMAND = (f'command: [{sys.executable}, {TOY}, --config, "{{seed}}", --steps, "{{steps}}", '
           '--step-time, "{step_time}"]\ntelemetry: {interval: 0}\n')
RUNGS = """\
matrix: {{seed: [{seeds}]}}
resources: {{gpus: 1, mem: 150M, time: "00:05:00"}}
rungs:
  - {{name: screen, params: {{steps: 4, step_time: {t}}}, promote: {{metric: loss, eta: 4}}}}
  - {{name: grow, params: {{steps: 12}}, promote: {{metric: loss, eta: 2}}}}
  - {{name: full, params: {{steps: 36}}, resources: {{gpus: 2}}}}
"""
FULL = """\
matrix: {{seed: [{seeds}], steps: [36], step_time: [{t}]}}
resources: {{gpus: 2, mem: 150M, time: "00:05:00"}}
"""


def spec_text(name: str, rungs: bool, step_time: float) -> str:
    return f"name: {name}\n{COMMAND}{(RUNGS if rungs else FULL).format(seeds=SEEDS, t=step_time)}"


def run(name: str, rungs: bool, step_time: float, workdir: Path) -> dict[str, object]:
    path = workdir / f"{name}.yaml"
    path.write_text(spec_text(name, rungs, step_time))
    started = time.monotonic()
    submit(path)
    while True:
        reconcile(name)
        record = Store.open().campaign(name)
        assert record is not None
        if record.state == "finished":
            break
        if time.monotonic() - started > 900:
            raise SystemExit(f"{name} did not finish in 15 minutes")
        time.sleep(2)
    wall = time.monotonic() - started
    shown = status(name)
    assert shown.spend is not None
    store = Store.open()
    failed = [a.task_index for a in store.attempts(record.id) if a.state != "COMPLETED"]
    if failed:
        raise SystemExit(f"{name}: tasks {failed} did not complete; their logs are under {workdir}")
    rows = MetricsStore(store.engine).rows(record.id, "loss")
    gpus = {a.task_index: (2 if (not rungs or a.task_index >= 2 * CONFIGS) else 1) for a in store.attempts(record.id)}
    gpu_steps = sum(gpus[r[0]] for r in rows)
    finals = {r[0] % CONFIGS: r[4] for r in rows if not rungs or r[0] >= 2 * CONFIGS}
    best = min(finals, key=lambda c: (finals[c], c))
    return {"gpu_hours": shown.spend.spent["gpu_hours"], "wall_s": round(wall, 1), "gpu_steps": gpu_steps,
            "best_config": best, "best_loss": finals[best], "tasks_run": len(store.attempts(record.id))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--step-time", type=float, default=0.25)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("needs the lab cluster: eval \"$(scripts/slurmlab up)\"")
    results: dict[str, list[dict[str, object]]] = {"rungs": [], "full": []}
    tmp = tempfile.mkdtemp(prefix="bench-rungs-")  # kept when a run fails, for its logs
    os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
    for i in range(args.repeat):
        for kind in ("rungs", "full"):
            results[kind].append(run(f"bench-{kind}-{i}", kind == "rungs", args.step_time, Path(tmp)))
            print(f"repeat {i + 1}/{args.repeat} {kind}: {results[kind][-1]}", file=sys.stderr, flush=True)
    shutil.rmtree(tmp)
    summary = {kind: {key: statistics.median(float(r[key]) for r in runs)  # type: ignore[arg-type]
                      for key in ("gpu_hours", "wall_s", "gpu_steps")} for kind, runs in results.items()}
    summary["ratio"] = {key: round(summary["rungs"][key] / summary["full"][key], 3)
                        for key in ("gpu_hours", "wall_s", "gpu_steps")}
    summary["best"] = {kind: sorted({(r["best_config"], r["best_loss"]) for r in runs})  # type: ignore[misc]
                       for kind, runs in results.items()}
    if args.json:
        print(json.dumps({"runs": results, "summary": summary}, indent=2))
        return
    print(f"{'':10} {'GPU-h (spent)':>14} {'GPU-steps':>10} {'wall s':>8}   best config (loss)")
    for kind in ("rungs", "full"):
        s = summary[kind]
        print(f"{kind:10} {s['gpu_hours']:14.4f} {s['gpu_steps']:10.0f} {s['wall_s']:8.1f}   {summary['best'][kind]}")
    r = summary["ratio"]
    print(f"{'ratio':10} {r['gpu_hours']:14.3f} {r['gpu_steps']:10.3f} {r['wall_s']:8.3f}   "
          f"(rungs / full, medians of {args.repeat})")


if __name__ == "__main__":
    main()
