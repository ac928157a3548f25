#!/usr/bin/env python3
"""The same workload with and without `right_size`, on the REAL lab cluster (scripts/slurmlab up;
the simulator is not merged yet), side by side: retries, CPU-hours and memory GB-hours reserved,
hours reserved but unused, time to finish.

The workload: TASKS tasks that each hold ~150 MB for a few seconds and ask 2500M and 30 minutes
(a user's guess). On 4 nodes × (2 CPUs, 4000 MB) that guess lets one task run per node. First
the campaign without right_size runs (its attempts are the profile's history); then a campaign of
the same profile with `right_size: {mode: enforce, min_samples: 5}` is submitted, sized from that
history. The cluster is shared: other jobs may queue either run; run it twice before trusting a
time-to-finish difference. Each run uses a state directory of its own under /tmp.

Usage: SLURM_CONF=… .venv/bin/python scripts/bench_right_size.py [--tasks 8] [--hold 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "integration" / "alloc_task.py"


@dataclass(frozen=True, slots=True)
class Run:
    campaign: str
    right_size: bool
    tasks: int
    attempts: int
    retries: int
    asked_mem_mb: int  # first attempts' request
    asked_time_min: int
    cpu_hours: float  # allocated: elapsed × CPUs, every attempt
    mem_gb_hours: float  # allocated: elapsed × memory limit
    mem_gb_hours_unused: float  # elapsed × (memory limit − peak RSS)
    limit_cpu_hours: float  # what the scheduler plans with: time limit × CPUs (backfill)
    limit_cpu_hours_unused: float  # (time limit − elapsed) × CPUs
    gpu_hours: float  # 0: the workload asks no GPU
    finish_s: float  # submit → campaign finished (reconcile every 2 s)


def spec(directory: Path, name: str, profile: str, tasks: int, hold_s: float, right_size: bool) -> Path:
    shutil.copy(TASK, directory / "alloc.py")
    policy = "{use: default, right_size: {mode: enforce, min_samples: 5}}" if right_size else "default"
    path = directory / f"{name}.yaml"
    path.write_text(f"""\
name: {name}
profile: {profile}
command: [python3, alloc.py, "150", "{hold_s}"]
matrix: {{seed: {list(range(tasks))}}}
resources: {{mem: 2500M, time: "00:30:00"}}
telemetry: {{interval: 1s}}
policy: {policy}
""")
    return path


def run(directory: Path, name: str, profile: str, tasks: int, hold_s: float, right_size: bool) -> Run:
    from campaignctl.adapters.report_queries import ReportQueries
    from campaignctl.adapters.store import Store
    from campaignctl.core.slurm.sacct import rss_mb
    from campaignctl.services.reconcile import reconcile
    from campaignctl.services.submit import submit

    start = time.monotonic()
    submit(spec(directory, name, profile, tasks, hold_s, right_size))
    store = Store.open()
    while True:
        reconcile(name)
        record = store.campaign(name)
        assert record is not None
        if record.state == "finished":
            break
        if time.monotonic() - start > 900:
            raise SystemExit(f"{name} not finished after 15 minutes")
        time.sleep(2)
    finish = time.monotonic() - start
    rows = ReportQueries(store.engine).attempts(record.id)
    first = json.loads(rows[0].resources_json)
    cpu = mem = mem_unused = limit = limit_unused = 0.0
    for r in rows:
        res = json.loads(r.resources_json)
        hours = (r.elapsed_s or 0) / 3600
        cpu += hours * res["cpus_per_task"]
        mem += hours * res["mem_mb"] / 1024
        mem_unused += hours * max(0.0, res["mem_mb"] - (rss_mb(r.max_rss) or 0.0)) / 1024
        limit += res["time_min"] / 60 * res["cpus_per_task"]
        limit_unused += max(0.0, res["time_min"] / 60 - hours) * res["cpus_per_task"]
    return Run(name, right_size, tasks, len(rows), len(rows) - tasks, first["mem_mb"], first["time_min"],
               round(cpu, 4), round(mem, 4), round(mem_unused, 4), round(limit, 3), round(limit_unused, 3), 0.0,
               round(finish, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--hold", type=float, default=5.0, help="seconds each task holds its memory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory(prefix="bench-right-size-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        os.environ.pop("CAMPAIGNCTL_DB_URL", None)
        profile = f"bench-rs-{tag}"
        runs = [run(Path(tmp), f"bench-rs-without-{tag}", profile, args.tasks, args.hold, False),
                run(Path(tmp), f"bench-rs-with-{tag}", profile, args.tasks, args.hold, True)]
    if args.json:
        print(json.dumps([asdict(r) for r in runs], indent=2))
        return
    fields = [f for f in Run.__slots__ if f not in ("campaign",)]  # type: ignore[attr-defined]
    print(f"{'':26}{'without right_size':>20}{'with right_size':>20}")
    for f in fields:
        print(f"{f:26}{getattr(runs[0], f)!s:>20}{getattr(runs[1], f)!s:>20}")


if __name__ == "__main__":
    main()
