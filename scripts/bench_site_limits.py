#!/usr/bin/env python3
"""Benchmark a campaign larger than the site's limit on queued jobs, on the real lab cluster.

A 1,000-task campaign of tiny tasks (`true`) under MaxSubmitJobs=200 (set on this user's
association for the run, restored after) and the lab's MaxArraySize (101 by default,
scripts/slurmlab): `campaignctl submit`, then `campaignctl reconcile` every --every seconds from a
cron-like environment (`env -i`, the PATH and variables a crontab line sets), until the campaign
finishes. Prints the Slurm version, the Slurm calls campaignctl made (submit's sbatch calls and the
ticks' own count), sbatch submissions and refusals, the largest number of this user's jobs queued
(sampled by the benchmark's own squeue between ticks), give-ups, ticks and wall time.

Usage (root, the lab up): eval "$(scripts/slurmlab up)"; .venv/bin/python scripts/bench_site_limits.py
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store

CAMPAIGNCTL = Path(sys.executable).parent / "campaignctl"


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def queued() -> int:
    return len(sh("squeue", "--me", "-r", "-h", "-o", "%i").split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--limit", type=int, default=200, help="MaxSubmitJobs for the run")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between ticks")
    parser.add_argument("--fail-first", action="store_true",
                        help="every task's attempt 1 exits 75 (EX_TEMPFAIL): the ticks resubmit them all")
    args = parser.parse_args()
    user = sh("id", "-un").strip()
    version = sh("sacct", "--version").strip()
    max_array = next(line.split("=")[1].strip() for line in sh("scontrol", "show", "config").splitlines()
                     if line.startswith("MaxArraySize"))
    base = Path(tempfile.mkdtemp(prefix="bench-limits-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    state = base / "state"
    cron_path = ":".join(dict.fromkeys([os.path.dirname(shutil.which("sbatch") or "/usr/bin/sbatch"),
                                        "/usr/bin", "/bin"]))
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": cron_path, "SHELL": "/bin/sh", "LOGNAME": user,
           "SLURM_CONF": os.environ["SLURM_CONF"], "XDG_STATE_HOME": str(state)}
    spec = base / "bench.yaml"
    command = ('[sh, -c, \'test "$CAMPAIGNCTL_ATTEMPT" != 1 || exit 75\', "{seed}"]' if args.fail_first
               else '["true", "{seed}"]')
    spec.write_text(f"name: limits\ncommand: {command}\n"
                    f"matrix: {{seed: [{', '.join(map(str, range(args.tasks)))}]}}\n"
                    "resources: {mem: 100M, time: \"00:05:00\"}\ntelemetry: {interval: 0}\n"
                    "policy: {use: default, rules: {failed: {backoff: 0}}}\n")
    sh("sacctmgr", "-i", "modify", "user", user, "set", f"MaxSubmitJobs={args.limit}")
    try:
        time.sleep(1)  # slurmdbd passes the limit on to slurmctld
        t0 = time.monotonic()
        out = subprocess.run([str(CAMPAIGNCTL), "submit", str(spec), "--json"], env={**os.environ, **env},
                             check=True, capture_output=True, text=True).stdout
        submit_calls = json.loads(out)["data"]["sbatch_calls"]
        most, tick_calls = queued(), []
        while True:
            tick = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), str(CAMPAIGNCTL),
                                   "reconcile", "limits", "--json"], capture_output=True, text=True)
            result = json.loads(tick.stdout)["data"]
            tick_calls.append(int(result["slurm_calls"]))
            most = max(most, queued())
            if not result["campaigns"] or result["campaigns"][0]["state"] == "finished":
                break
            time.sleep(args.every)
        wall = time.monotonic() - t0
    finally:
        sh("sacctmgr", "-i", "modify", "user", user, "set", "MaxSubmitJobs=-1")
    os.environ["XDG_STATE_HOME"] = str(state)
    store = Store.open()
    record = store.campaign("limits")
    assert record is not None
    subs = store.submissions(record.id)
    entries = DecisionLog(store.engine).entries(record.id)
    counts: dict[str, int] = {}
    for row in store.history(record.id):
        counts[row.state] = counts.get(row.state, 0) + 1
    what = "attempt 1 exits 75, attempt 2 `true`" if args.fail_first else "`true`"
    print(f"{version}, MaxArraySize={max_array}, MaxSubmitJobs={args.limit}, {args.tasks} tasks ({what}), "
          f"reconcile every {args.every:g} s")
    print(f"  attempts by state      {counts}")
    print(f"  give-ups               {sum(1 for e in entries if e.action == 'give_up')}")
    sizes = sorted({s.size for s in subs})
    print(f"  arrays (pieces)        {len(subs)} of sizes {sizes}, refused tries {sum(s.tries for s in subs)}")
    print(f"  Slurm calls            submit: {submit_calls} sbatch; ticks: {sum(tick_calls)} in {len(tick_calls)} "
          f"ticks (median {statistics.median(tick_calls):g}, most {max(tick_calls)} in one tick)")
    print(f"  largest queued         {most} (sampled between ticks; limit {args.limit})")
    print(f"  wall time              {wall:.0f} s from submit to finished")


if __name__ == "__main__":
    main()
