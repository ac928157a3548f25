#!/usr/bin/env python3
"""Benchmark a campaign of many short tasks on the real lab cluster, run by a non-root user.

N tasks (default 100,000): the even ones a `true`-sized shell line, the odd ones sleeping 0.1-0.9 s;
task 777's first attempt exits 75 (EX_TEMPFAIL), so one retry is part of the run. With `--per-job K
--processes M` each array element runs K tasks as plain processes, M at a time (`pack: {per_job: K,
processes: M}`); with `--per-job 1` every task is an array element of its own. Under
`MaxSubmitJobs=200` (set on the user's association for the run, then cleared) and the lab's
`MaxArraySize` (101), `campaignctl submit` then `campaignctl reconcile` every --every seconds from
a cron-like environment (`runuser` + `env -i`, the variables a crontab line sets) until the campaign
finishes.

Prints: the Slurm version; the RPCs the user sent slurmctld (sdiag's per-user count, read as that
user, after minus before: sbatch, squeue, scontrol, and the srun each element's batch script
starts); the Slurm commands campaignctl ran (sacct and sacctmgr go to slurmdbd, not slurmctld);
arrays and elements; attempts by state; the failing task's attempts; every task's result (its
latest attempt's exit.json returncode 0 and its `result <seed>` line); wall time.

Usage (root, a lab up; a user with a Slurm association, e.g. the tests' cctl-alice):
    eval "$(scripts/slurmlab up)"
    .venv/bin/python scripts/bench_many_tasks.py --tasks 100000 --per-job 500 --processes 16
    .venv/bin/python scripts/bench_many_tasks.py --tasks 1000 --per-job 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from campaignctl.adapters.store import Store  # noqa: E402

COMMAND = ('[sh, -c, \'test "$1" != 777 || test "$CAMPAIGNCTL_ATTEMPT" != 1 || exit 75; '
           'test $(($1 % 2)) = 0 || sleep 0.$(($1 % 9 + 1)); echo "result $1"\', sh, "{seed}"]')


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def user_venv(user: str, base: Path) -> Path:
    """A virtualenv `user` can run: the system python3 of this minor version, this interpreter's
    site-packages and this tree's package, copied (root's own interpreter is under /root)."""
    venv = base / "venv"
    sh("/usr/bin/python3", "-m", "venv", "--without-pip", str(venv))
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    target = venv / "lib" / minor / "site-packages"
    shutil.copytree(sysconfig.get_paths()["purelib"], target, dirs_exist_ok=True, symlinks=True,
                    ignore=shutil.ignore_patterns("__editable__*", "campaignctl"))
    shutil.copytree(REPO / "campaignctl", target / "campaignctl", ignore=shutil.ignore_patterns("__pycache__"))
    sh("chmod", "-R", "a+rX", str(venv))
    return venv / "bin" / "python"


def rpcs(user: str, env: dict[str, str]) -> int:
    """slurmctld's count of RPCs from `user` (sdiag, run as that user)."""
    out = sh("runuser", "-u", user, "--", "env", f"SLURM_CONF={env['SLURM_CONF']}", "sdiag")
    for line in out.split("Remote Procedure Call statistics by user", 1)[-1].splitlines():
        if line.split() and line.split()[0] == user:
            return int(line.split("count:")[1].split()[0])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--per-job", type=int, default=500, help="tasks to an array element (1: unpacked)")
    parser.add_argument("--processes", type=int, default=16, help="of them running at once")
    parser.add_argument("--cpus", type=int, default=2, help="an element's CPUs (the lab's nodes have 2)")
    parser.add_argument("--limit", type=int, default=200, help="MaxSubmitJobs for the run")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between ticks")
    parser.add_argument("--user", default="cctl-alice")
    args = parser.parse_args()
    version = sh("sacct", "--version").strip()
    max_array = next(line.split("=")[1].strip() for line in sh("scontrol", "show", "config").splitlines()
                     if line.startswith("MaxArraySize"))
    base = Path(tempfile.mkdtemp(prefix="bench-many-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    python = user_venv(args.user, base)
    work = base / "work"
    work.mkdir()
    sh("chown", args.user, str(work))
    cron_path = ":".join(dict.fromkeys([os.path.dirname(shutil.which("sbatch") or "/usr/bin/sbatch"),
                                        "/usr/bin", "/bin"]))
    env = {"HOME": str(work), "PATH": cron_path, "SHELL": "/bin/sh", "LOGNAME": args.user,
           "SLURM_CONF": os.environ["SLURM_CONF"], "XDG_STATE_HOME": str(work / "state")}
    pack = (f"pack: {{per_job: {args.per_job}, processes: {args.processes}, cpus: {args.cpus}}}\n"
            if args.per_job > 1 else "")
    spec = work / "many.yaml"
    spec.write_text(f"name: many\ncommand: {COMMAND}\n"
                    f"matrix: {{seed: [{', '.join(map(str, range(args.tasks)))}]}}\n"
                    "resources: {cpus_per_task: 1, mem: 100M, time: \"00:01:00\"}\n" + pack
                    + "policy: {use: default, rules: {failed: {backoff: 0}}}\n")
    sh("chown", args.user, str(spec))

    def as_user(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["runuser", "-u", args.user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                               str(python), "-m", "campaignctl", *argv], capture_output=True, text=True, cwd=work)

    sh("sacctmgr", "-i", "modify", "user", args.user, "set", f"MaxSubmitJobs={args.limit}")
    try:
        time.sleep(1)  # slurmdbd passes the limit on to slurmctld
        before = rpcs(args.user, env)
        t0 = time.monotonic()
        submitted = as_user("submit", str(spec), "--json")
        if submitted.returncode != 0:
            sys.exit(f"submit failed: {submitted.stderr or submitted.stdout}")
        submit_calls = json.loads(submitted.stdout)["data"]["sbatch_calls"]
        submit_s = time.monotonic() - t0
        tick_calls: list[int] = []
        while True:
            tick = as_user("reconcile", "many", "--json")
            result = json.loads(tick.stdout)["data"] if tick.stdout.startswith("{") else None
            if result is None:
                print(f"tick failed: {tick.stderr.strip()[-300:]}", file=sys.stderr)
            else:
                tick_calls.append(int(result["slurm_calls"]))
                if not result["campaigns"] or result["campaigns"][0]["state"] == "finished":
                    break
            print(f"  {time.monotonic() - t0:6.0f} s: tick {len(tick_calls)}", file=sys.stderr, flush=True)
            time.sleep(args.every)
        wall = time.monotonic() - t0
        sent = rpcs(args.user, env) - before
    finally:
        sh("sacctmgr", "-i", "modify", "user", args.user, "set", "MaxSubmitJobs=-1")

    os.environ["XDG_STATE_HOME"] = env["XDG_STATE_HOME"]
    store = Store.open()
    record = store.campaign("many")
    assert record is not None
    rows = store.history(record.id)
    latest = {r.task_index: r for r in sorted(rows, key=lambda r: r.attempt_number)}
    subs = store.submissions(record.id)
    wrong = []
    for task, row in latest.items():
        folder = Path(record.run_dir) / "tasks" / str(task) / row.token
        try:
            ended = json.loads((folder / "exit.json").read_text())
            printed = (folder / "output.log").read_text()
        except (OSError, ValueError) as exc:
            wrong.append(f"{task}: {exc}")
            continue
        if ended.get("returncode") != 0 or f"result {task}\n" not in printed:
            wrong.append(f"{task}: returncode {ended.get('returncode')}")
    failing = sorted((r.attempt_number, r.state, r.exit_code) for r in rows if r.task_index == 777)
    mode = (f"{args.per_job} to a job, {args.processes} at a time as plain processes" if args.per_job > 1
            else "one array element each")
    print(f"{version}, MaxArraySize={max_array}, MaxSubmitJobs={args.limit}, {args.tasks} tasks ({mode}), "
          f"reconcile every {args.every:g} s from env -i as {args.user}")
    print(f"  slurmctld RPCs (sdiag)  {sent} from {args.user}")
    print(f"  Slurm commands          submit: {submit_calls} sbatch in {submit_s:.1f} s; ticks: {sum(tick_calls)} "
          f"in {len(tick_calls)} ticks")
    print(f"  submissions             {len(subs)}, of {sorted((s.size for s in subs), reverse=True)} tasks")
    print(f"  attempts by state       {dict(Counter(r.state for r in rows))}")
    print(f"  task 777's attempts     {failing}")
    print(f"  results                 {len(latest) - len(wrong)} of {args.tasks} tasks exit 0 with their line"
          + (f"; wrong: {wrong[:5]}" if wrong else ""))
    print(f"  wall time               {wall:.0f} s from submit to finished")


if __name__ == "__main__":
    main()
