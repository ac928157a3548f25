#!/usr/bin/env python3
"""The default policy of this checkout against an older one (`--old REV`, default the commit
before the raise rules of core/tick/siblings.py) on the real lab cluster: the same memory-bound
campaign under each, one after the other, reconciled from a cron-like environment (`env -i` with
what a crontab line sets) every --tick seconds until it finishes.

The campaign: --tasks tasks (default 48), 1 GPU, 1 CPU and 2000M each, so a lab node (2 CPUs,
2 GPUs, 4000 MB) holds exactly two: any memory raise costs a slot, as on the simulator's default
cluster. Each task holds memory growing over --seconds to a need drawn from its seed
(1300-2199 MB, about a quarter above what 2000M leaves after Python and the runner): those end
OUT_OF_MEMORY part-way, as a real out-of-memory does. Figures from sacct (one line per job,
`-X`): makespan (first submit to the last end), GPU-hours allocated and wasted (attempts that did
not complete), attempts, tasks completed, and the decision log's rows.

    eval "$(scripts/slurmlab up)"
    .venv/bin/python scripts/bench_policy_real.py [--tasks 48] [--old f86a046] [--tick 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROGRAM = """\
import sys, time
seed, seconds = int(sys.argv[1]), float(sys.argv[2])
need = 1300 + (seed * 37) % 900  # MB
steps, held = 10, []
for step in range(steps):
    held.append(b"\\x01" * (need * 2**20 // steps))  # written, so resident
    time.sleep(seconds / steps)
print(f"seed {seed} held {need} MB for {seconds:g} s")
"""


def spec_text(tasks: int, seconds: int) -> str:
    seeds = ", ".join(str(i) for i in range(tasks))
    return (f"name: memcamp\ncommand: [python3, hold.py, \"{{seed}}\", \"{seconds}\"]\n"
            f"matrix: {{seed: [{seeds}]}}\n"
            "resources: {partition: batch, gpus: 1, cpus_per_task: 1, mem: 2000M, time: \"00:05:00\"}\n"
            "policy: default\n")


def cron_env(state: Path, pythonpath: str | None) -> dict[str, str]:
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", "/root"),
           "SHELL": "/bin/sh", "LOGNAME": os.environ.get("LOGNAME", "root"), "XDG_STATE_HOME": str(state),
           "SLURM_CONF": os.environ.get("SLURM_CONF", "")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def campaignctl(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "campaignctl",
                           *args], cwd=cwd, capture_output=True, text=True, check=False)


def run(label: str, root: Path, pythonpath: str | None, args: argparse.Namespace) -> dict[str, object]:
    work, state = root / label, root / f"{label}-state"
    work.mkdir()
    (work / "hold.py").write_text(PROGRAM)
    (work / "memcamp.yaml").write_text(spec_text(args.tasks, args.seconds))
    env = cron_env(state, pythonpath)
    started = time.time()
    submitted = campaignctl(env, "submit", "memcamp.yaml", cwd=work)
    if submitted.returncode != 0:
        raise SystemExit(f"{label}: submit failed: {submitted.stderr}")
    seen: set[str] = set()  # every array job id a task showed (a first array's, before its retries)
    while True:
        time.sleep(args.tick)
        ticked = campaignctl(env, "reconcile", "memcamp", cwd=work)
        if ticked.returncode != 0:
            print(f"{label}: reconcile exited {ticked.returncode}: {ticked.stderr.strip()[-500:]}", flush=True)
        data = json.loads(campaignctl(env, "status", "memcamp", "--json", cwd=work).stdout)["data"]
        seen |= {str(t["job_id"]).split("_")[0] for t in data["tasks"] if t.get("job_id")}
        print(f"{label}: {time.time() - started:.0f} s, {data['campaigns'][0]['summary']}", flush=True)
        if data["campaigns"][0]["state"] == "finished" or time.time() - started > args.limit:
            break
    jobs = sorted(seen | set(_all_job_ids(env, work)))
    completed = sum(t["state"] == "COMPLETED" for t in data["tasks"])
    rows = len(json.loads(campaignctl(env, "log", "memcamp", "--json", cwd=work).stdout)["data"])
    return {"label": label, **sacct_figures(jobs, started), "completed": completed, "log_rows": rows}


def _all_job_ids(env: dict[str, str], work: Path) -> list[str]:
    """Every attempt's array job id, from the decision log's resubmissions and the first submission."""
    logged = json.loads(campaignctl(env, "log", "memcamp", "--json", cwd=work).stdout)["data"]
    return [str(e["detail"]["job_id"]).split("_")[0] for e in logged if e.get("detail", {}).get("job_id")]


def sacct_figures(jobs: list[str], started: float) -> dict[str, object]:
    out = subprocess.run(["sacct", "-X", "-P", "--noheader", "-j", ",".join(jobs),
                          "--format=JobID,State,ElapsedRaw,AllocTRES,End"], capture_output=True, text=True,
                         check=True).stdout
    gpu_s = wasted_s = 0.0
    attempts, last_end = 0, started
    for line in out.splitlines():
        job_id, state, elapsed, tres, end = line.split("|")
        if "[" in job_id or state.startswith("PENDING"):
            continue
        gpus = sum(int(part.split("=")[1]) for part in tres.split(",") if part.startswith("gres/gpu="))
        attempts += 1
        gpu_s += int(elapsed or 0) * gpus
        if not state.startswith("COMPLETED"):
            wasted_s += int(elapsed or 0) * gpus
        if end and end != "Unknown":
            last_end = max(last_end, datetime.fromisoformat(end).timestamp())
    return {"makespan_s": round(last_end - started), "gpu_hours": round(gpu_s / 3600, 4),
            "wasted_gpu_hours": round(wasted_s / 3600, 4), "attempts": attempts}


def main() -> int:
    args = _args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        old = root / "old-checkout"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old), args.old],
                       check=True, capture_output=True)
        try:
            results = [run("new", root, str(REPO), args), run("old", root, str(old), args)]
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], check=False)
    new, older = results
    print(f"{'policy':<34}{'completed':>10}{'attempts':>9}{'makespan s':>11}{'GPU-h':>8}{'wasted GPU-h':>13}"
          f"{'log rows':>9}")
    for r, name in ((new, "default (this checkout)"), (older, f"default at {args.old}")):
        print(f"{name:<34}{r['completed']:>10}{r['attempts']:>9}{r['makespan_s']:>11}{r['gpu_hours']:>8}"
              f"{r['wasted_gpu_hours']:>13}{r['log_rows']:>9}")
    print(f"ratio new/old: makespan {new['makespan_s'] / max(1, older['makespan_s']):.2f}, "  # type: ignore[operator]
          f"wasted {new['wasted_gpu_hours'] / max(1e-9, older['wasted_gpu_hours']):.2f}")  # type: ignore[operator]
    return 0


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=48)
    parser.add_argument("--seconds", type=int, default=30, help="how long each task holds its memory")
    parser.add_argument("--old", default="f86a046", help="the commit whose default policy to compare with")
    parser.add_argument("--tick", type=float, default=10.0, help="seconds between reconcile ticks")
    parser.add_argument("--limit", type=float, default=1800.0, help="give up a run after this many seconds")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
