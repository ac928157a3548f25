#!/usr/bin/env python3
"""Every figure of a million-task campaign's costs, an older commit (--old, default origin's
main or HEAD~1) against this checkout, in one run, each beside its target and marked met or not:

- status: `status NAME` (the service as the table calls it: a page of 100 rows) at 10,000 tasks,
  SQLite and PostgreSQL (scripts/bench_store.py: `eval "$(scripts/pglab up)"` first), and at
  --big tasks (default 1,000,000) on a finished campaign's store: made once by the older code
  (`submit` against a fake Slurm, the spec's limits raised, then every attempt set COMPLETED,
  every 97th FAILED, by one SQL UPDATE: a finished campaign's rows without its telemetry files),
  copied for each side; the newer code migrates its copy before the timed runs. The store's size
  after the newer code's migration is the store figure (a lower bound: no telemetry rows);
- tick: the worst-case tick ÷ submitit's `read_info` on the same sacct text at 10,000 and
  100,000 tasks, and the tick where nothing changed (scripts/bench_reconcile.py);
- submit: `submit` of --big tasks packed 500 to an element (MaxArraySize 1001), its sbatch calls
  against ⌈n / (K × array size)⌉, its wall time and peak RSS (scripts/bench_submit.py --lift);
- simulate: --sim-tasks simulated tasks with the failure mix on 64 × 8 A100 and on the default
  cluster (--sim-clusters), without a throttle and with max_parallel 512 (this checkout's
  scripts/bench_simulate.py --only scale, against each side's code). 1,000,000 simulated tasks
  are scripts/bench_simulate.py --only big (this side's alone: the older refuses more than 500,000).

Each side runs in its own child processes with PYTHONPATH at its tree (the older one a temporary
`git worktree`), one after the other; medians of --repeat where a part repeats. The simulate part
takes the longest (four runs a side at 100,000 tasks, 2-5 minutes each): leave it out with --only.

Usage: .venv/bin/python scripts/bench_scale.py [--old REF] [--only status,tick,submit,simulate]
       [--big 1000000] [--sim-tasks 100000] [--sim-clusters 64x8,default] [--repeat 3]
Example (the figures of docs/performance.md#a-million-tasks-every-figure):
       .venv/bin/python scripts/bench_scale.py --old 52c369e --only status,tick,submit
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARTS = ("status", "tick", "submit", "simulate")
CAMPAIGN = "many"
PER_ELEMENT, PROCESSES, MAX_ARRAY = 500, 16, 1001
SETTLE = """UPDATE attempts SET state = CASE WHEN id % 97 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
 slurm_state = CASE WHEN id % 97 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
 exit_code = CASE WHEN id % 97 = 0 THEN 1 ELSE 0 END, elapsed_s = 30 + id % 60, nodes = 'node' || (1 + id % 4),
 ended_at = '2026-11-30T10:00:00+00:00', alloc_tres = 'cpu=2,mem=1G,node=1', job_id = COALESCE(job_id, '1')"""


def spec_text(tasks: int) -> str:
    seeds = ", ".join(str(i) for i in range(tasks))
    return (f"name: {CAMPAIGN}\ncommand: [\"true\", \"{{seed}}\"]\nmatrix: {{seed: [{seeds}]}}\n"
            "resources: {mem: 100M, time: \"00:01:00\"}\narray: {max_parallel: 8}\n"
            f"pack: {{per_job: {PER_ELEMENT}, processes: {PROCESSES}}}\n")


# ---- children: run with PYTHONPATH at one side's tree; each prints one JSON line

def child_submit(tasks: int, state: Path) -> dict[str, float]:
    """`submit` of `tasks` against a fake Slurm, its store left at `state`."""
    from campaignctl.adapters import proc, slurm, yaml_source
    from campaignctl.core.model import params
    from campaignctl.services.submit import submit
    from tests.fakeslurm import FakeSlurm
    # the spec's limits raised: an older tree refuses a campaign this large
    params.MAX_TASKS, yaml_source.MAX_BYTES, yaml_source._MAX_NODES = 1_000_000, 64 * 2**20, 5_000_000
    os.environ["XDG_STATE_HOME"] = str(state)
    state.mkdir(parents=True, exist_ok=True)
    spec = state.parent / "spec.yaml"
    spec.write_text(spec_text(tasks))
    proc.EXECUTOR = FakeSlurm(max_array_size=MAX_ARRAY)
    slurm.forget_site()
    started = time.perf_counter()
    result = submit(spec)
    return {"seconds": time.perf_counter() - started, "sbatch": result.sbatch_calls, "peak_mb": _peak_mb()}


def child_status(state: Path, repeat: int) -> dict[str, object]:
    """`status NAME` as the table asks for it, after one call that migrates the store."""
    import inspect

    from campaignctl.services import status as status_mod
    os.environ["XDG_STATE_HOME"] = str(state)
    asks = inspect.signature(status_mod.status).parameters
    page = {k: v for k, v in (("limit", 100), ("campaign_figures", False)) if k in asks}
    status_mod.status(CAMPAIGN, **page)
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        shown = status_mod.status(CAMPAIGN, **page)
        runs.append(time.perf_counter() - started)
    store = sum(p.stat().st_size for p in (state / "campaignctl").glob("campaignctl.db*"))
    return {"seconds": statistics.median(runs), "runs": runs, "tasks": shown.campaigns[0].tasks,
            "store_mb": store / 2**20, "peak_mb": _peak_mb()}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- the parent

@contextmanager
def older_tree(ref: str) -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="bench-scale-old-"))
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), ref],
                   check=True, capture_output=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(where)], capture_output=True)


def run(tree: Path, argv: list[str], timeout: float = 7200) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, *argv], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {tree} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def child(tree: Path, *args: str) -> dict[str, object]:
    out = run(tree, [str(Path(__file__).resolve()), "--child", *args])
    return json.loads(out.strip().splitlines()[-1])


def status_part(sides: dict[str, Path], big: int, repeat: int, work: Path) -> list[tuple[str, dict[str, float], str]]:
    rows: list[tuple[str, dict[str, float], str]] = []
    small = {side: json.loads(run(tree, [str(tree / "scripts" / "bench_store.py"), "--tasks", "10000", "--repeat",
                                         str(repeat), "--json"]))
             for side, tree in sides.items()}
    for store in ("sqlite", "postgresql"):
        figures = {side: r["median_s"][store]["status"] for side, r in small.items() if store in r["median_s"]}
        if figures:
            rows.append((f"status NAME, 10,000 tasks, {store} (s)", figures, "≤ 0.3"))
    made = work / "made" / "state"
    made.mkdir(parents=True)
    first = next(iter(sides))  # the older code makes the store, which the newer migrates
    child(sides[first], "submit", str(big), str(made))
    db = made / "campaignctl" / "campaignctl.db"
    subprocess.run(["sqlite3", str(db), SETTLE], check=True)
    figures, sizes, peaks = {}, {}, {}
    for side, tree in sides.items():
        copy = work / side / "state"
        shutil.copytree(made, copy)
        got = child(tree, "status", str(copy), str(repeat))
        figures[side], sizes[side], peaks[side] = got["seconds"], got["store_mb"], got["peak_mb"]
    rows.append((f"status NAME, {big:,} tasks, sqlite (s)", figures, "≤ 1"))
    rows.append((f"store of a finished {big:,}-task campaign, sqlite (MB; no telemetry rows)", sizes, "≤ 2048"))
    rows.append((f"status NAME, {big:,} tasks: peak RSS (MB)", peaks, "≤ 2048"))
    return rows


def tick_part(sides: dict[str, Path], repeat: int) -> list[tuple[str, dict[str, float], str]]:
    got = {side: json.loads(run(tree, [str(tree / "scripts" / "bench_reconcile.py"), "--tasks", "10000", "--big",
                                       "100000", "--repeat", str(repeat), "--json"]))
           for side, tree in sides.items()}
    # the same tick of a campaign with `array: {max_parallel: 512}`: this checkout's benchmark
    # (an older one may not have --max-parallel) run against each side's code
    capped = {side: json.loads(run(tree, [str(_this_bench(tree)), "--tasks", "10000", "--big", "0",
                                          "--max-parallel", "512", "--repeat", str(repeat), "--json"]))
              for side, tree in sides.items()}
    return [("worst-case tick ÷ read_info, 10,000 tasks", {s: r["ratio_tick_vs_read_info"] for s, r in got.items()},
             "≤ 2.0"),
            ("worst-case tick ÷ read_info, 100,000 tasks",
             {s: r["big"]["tick"]["wall_s"] / r["big"]["read_info"]["wall_s"] for s, r in got.items()}, "≤ 2.0"),
            ("tick, nothing changed ÷ read_info, 10,000 tasks",
             {s: r["ratio_steady_vs_read_info"] for s, r in got.items()}, "≤ 1.1"),
            ("worst-case tick, 100,000 tasks: peak RSS (MB)",
             {s: r["big"]["tick"]["peak_rss_mb"] for s, r in got.items()}, "≤ 2048"),
            ("max_parallel 512: tick ÷ read_info, 10,000 tasks (1,024 changed)",
             {s: r["ratio_tick_vs_read_info"] for s, r in capped.items()}, "≤ 2.0"),
            ("max_parallel 512: tick, nothing changed ÷ read_info, 10,000 tasks",
             {s: r["ratio_steady_vs_read_info"] for s, r in capped.items()}, "≤ 1.1"),
            ("max_parallel 512: tick, nothing changed, 10,000 tasks (s)",
             {s: r["median_s"]["steady"] for s, r in capped.items()}, "—")]


def _this_bench(tree: Path, name: str = "bench_reconcile") -> Path:
    """This checkout's scripts/<name>.py, inside `tree` (it imports the code beside it)."""
    mine = Path(__file__).resolve().parent / f"{name}.py"
    there = tree / "scripts" / f"{name}.py"
    if there.resolve() == mine:
        return there
    copy = tree / "scripts" / f"_{name}_now.py"
    shutil.copyfile(mine, copy)
    return copy


def submit_part(sides: dict[str, Path], big: int, work: Path) -> list[tuple[str, dict[str, float], str]]:
    got = {side: child(tree, "submit", str(big), str(work / f"submit-{side}" / "state"))
           for side, tree in sides.items()}
    expected = math.ceil(big / (PER_ELEMENT * MAX_ARRAY))
    return [(f"submit of {big:,} tasks (s)", {s: r["seconds"] for s, r in got.items()}, "≤ 60"),
            (f"submit of {big:,} tasks: sbatch calls", {s: r["sbatch"] for s, r in got.items()}, f"≤ {expected}"),
            (f"submit of {big:,} tasks: peak RSS (MB)", {s: r["peak_mb"] for s, r in got.items()}, "≤ 2048")]


_SCALE = re.compile(r"scale: (\d+) tasks, default policy, (.+?): ([\d.]+) s wall \(([\d.]+) s CPU")


def simulate_part(sides: dict[str, Path], tasks: int, clusters: str) -> list[tuple[str, dict[str, float], str]]:
    found: dict[str, dict[str, float]] = {}
    for side, tree in sides.items():
        out = run(tree, [str(_this_bench(tree, "bench_simulate")), "--only", "scale", "--tasks", str(tasks),
                         "--clusters", clusters])
        for match in _SCALE.finditer(out):
            found.setdefault(f"simulate {int(match[1]):,} tasks, {match[2]} (s CPU)", {})[side] = float(match[4])
    return [(label, figures, "≤ 30" if "A100" in label or "64" in label else "≤ 120")
            for label, figures in found.items()]


def met(value: float, target: str) -> str:
    if target == "—":  # a figure shown beside the others, with no target of its own
        return "—"
    return "met" if value <= float(target.split()[-1]) else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", default="HEAD~1", help="the commit to compare with (a worktree of it is made)")
    parser.add_argument("--only", default=",".join(PARTS), help=f"a comma-separated choice of {', '.join(PARTS)}")
    parser.add_argument("--big", type=int, default=1_000_000, help="tasks of the large status and submit")
    parser.add_argument("--sim-tasks", type=int, default=100_000)
    parser.add_argument("--sim-clusters", default="64x8,default",
                        help="the simulated clusters of the simulate part (64x8: 64 nodes x 8 A100; default: 8 nodes)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = (child_submit(int(rest[0]), Path(rest[1])) if kind == "submit"
                  else child_status(Path(rest[0]), int(rest[1])))
        print(json.dumps(result))
        return
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--only: no part named {', '.join(unknown)} (the parts: {', '.join(PARTS)})")
    rows: list[tuple[str, dict[str, float], str]] = []
    with older_tree(args.old) as old, tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        sides = {"old": old, "new": REPO}
        work = Path(tmp)
        for part in parts:
            started = time.perf_counter()
            print(f"... {part}", file=sys.stderr, flush=True)
            if part == "status":
                rows += status_part(sides, args.big, args.repeat, work)
            elif part == "tick":
                rows += tick_part(sides, args.repeat)
            elif part == "submit":
                rows += submit_part(sides, args.big, work)
            else:
                rows += simulate_part(sides, args.sim_tasks, args.sim_clusters)
            print(f"    {part}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"old = {args.old}, new = this checkout; load average at the end {load}")
    print(f"{'what':<74} {'old':>9} {'new':>9} {'target':>8}  new")
    for label, figures, target in rows:
        old_s, new_s = (f"{figures[s]:.3f}".rstrip("0").rstrip(".") if s in figures else "—" for s in ("old", "new"))
        verdict = met(figures["new"], target) if "new" in figures else "—"
        print(f"{label:<74} {old_s:>9} {new_s:>9} {target:>8}  {verdict}")


if __name__ == "__main__":
    main()
