#!/usr/bin/env python3
"""Packing on the real lab cluster: the same --configs small configs (default 32) of a toy
trainer (tests/integration/toy_trainer.py: it holds --gpu-mb of the fake NVML's 40 GiB GPU and
reports a val_loss that is a known function of its config) run first unpacked, then with
`pack: auto`, both under one profile, so the second is packed from what the first was measured
to use. Each is reconciled from a cron-like environment (`env -i` with what a crontab line sets)
every --tick seconds until it finishes. Figures from sacct (one line per job, `-X`): makespan,
GPU-hours allocated, attempts; from campaignctl: the GPU-hours its spend counts, the pack
decision, and the configs ranked by their final val_loss (the same ranking is the check that
packing changed no result). Then `campaignctl simulate` runs --sim-tasks tasks (default 10,000)
of the same trainer, packed and unpacked (`-p campaign -p campaign+unpacked`), on the lab's
shape (4 nodes of 2 CPUs, 4000 MB, 2 GPUs), for its GPU-hours ratio beside the real one.

    eval "$(scripts/slurmlab up)"
    .venv/bin/python scripts/bench_packing.py [--configs 32] [--steps 20] [--gpu-mb 8192] [--tick 5]
    .venv/bin/python scripts/bench_packing.py --sim-only       # the simulator's figures alone
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench_policy_real import campaignctl, cron_env, sacct_figures

REPO = Path(__file__).resolve().parent.parent
TOY = REPO / "tests" / "integration" / "toy_trainer.py"
FAKE_NVML = REPO / "tests" / "integration" / "fake_nvml"
LRS = (0.0003, 0.001, 0.003, 0.01)


def spec_text(name: str, profile: str, args: argparse.Namespace, pack: str) -> str:
    widths = [16 * (i + 1) for i in range(-(-args.configs // len(LRS)))]
    tasks = [{"lr": lr, "width": w} for w in widths for lr in LRS][:args.configs]
    return (f"name: {name}\nprofile: {profile}\n"
            f"command: [{sys.executable}, toy_trainer.py, \"{{lr}}\", \"{{width}}\", --gpu-mb, \"{args.gpu_mb}\", "
            f"--steps, \"{args.steps}\"]\n"
            f"tasks: {json.dumps(tasks)}\n"
            "resources: {gpus: 1, cpus_per_task: 1, mem: 300M, time: \"00:10:00\"}\n"
            "telemetry: {interval: 2s}\n" + (f"pack: {pack}\n" if pack else ""))


def run(label: str, name: str, profile: str, pack: str, root: Path, args: argparse.Namespace) -> dict[str, object]:
    work = root / label
    work.mkdir()
    shutil.copy(TOY, work / "toy_trainer.py")
    (work / f"{name}.yaml").write_text(spec_text(name, profile, args, pack))
    env = {**cron_env(root / "state", str(FAKE_NVML)), "FAKE_NVML_DIR": str(root / "gpu-memory")}
    started = time.time()
    submitted = campaignctl(env, "submit", f"{name}.yaml", cwd=work)
    if submitted.returncode != 0:
        raise SystemExit(f"{label}: submit failed: {submitted.stderr}")
    while True:
        time.sleep(args.tick)
        ticked = campaignctl(env, "reconcile", name, cwd=work)
        if ticked.returncode != 0:
            print(f"{label}: reconcile exited {ticked.returncode}: {ticked.stderr.strip()[-500:]}", flush=True)
        data = json.loads(campaignctl(env, "status", name, "--json", cwd=work).stdout)["data"]
        print(f"{label}: {time.time() - started:.0f} s, {data['campaigns'][0]['summary']}", flush=True)
        if data["campaigns"][0]["state"] == "finished" or time.time() - started > args.limit:
            break
    jobs = sorted({str(t["job_id"]).split("_")[0] for t in data["tasks"] if t.get("job_id")})
    results = json.loads(campaignctl(env, "results", name, "--json", cwd=work).stdout)["data"]["rows"]
    logged = json.loads(campaignctl(env, "log", name, "--json", cwd=work).stdout)["data"]
    packs = [e["reason"] for e in logged if e["action"] == "pack"]
    return {"label": label, **sacct_figures(jobs, started),
            "counted_gpu_hours": round(data["spend"]["spent"]["gpu_hours"], 4),
            "completed": sum(t["state"] == "COMPLETED" for t in data["tasks"]),
            "ranking": [(r["lr"], r["width"]) for r in results], "packs": packs}


LAB_CLUSTER = "nodes:\n  - {name: \"node[1-4]\", cpus: 2, mem: 4000M, gpus: 2, gpu_type: a100}\n"
GPU_MB = 40960  # the fake NVML's GPU


def simulated(root: Path, args: argparse.Namespace) -> float:
    """The simulator's GPU-hours ratio, packed ÷ unpacked, for --sim-tasks tasks of the toy."""
    (root / "lab.yaml").write_text(LAB_CLUSTER)
    (root / "sim.yaml").write_text(spec_text("packsim", "packsim", args, "auto"))
    workload = (f"synthetic:tasks={args.sim_tasks},gpu_mem={args.gpu_mb / GPU_MB:.4f},gpu_util=3,cpu_util=2,"
                f"dur_mean={(args.steps + 1) / 60:.4f},dur_sd=0.01,mem_mean=100,oom=0,timeout=0,exit=0,tempfail=0,"
                "node_fail=0,preempt=0")
    env = cron_env(root / "sim-state", None)
    started = time.monotonic()
    out = campaignctl(env, "simulate", "sim.yaml", "-p", "campaign", "-p", "campaign+unpacked", "--cluster",
                      "lab.yaml", "--workload", workload, "--json", cwd=root)
    if out.returncode != 0:
        raise SystemExit(f"simulate failed: {out.stderr}")
    runs = {r["policy"]: r for r in json.loads(out.stdout)["data"]["runs"]}
    packed, alone = runs["campaign"], runs["campaign+unpacked"]
    print(f"\nsimulated, {args.sim_tasks} tasks on the lab's shape: GPU-hours {packed['gpu_hours']} packed, "
          f"{alone['gpu_hours']} unpacked; makespan {packed['makespan_h']} h, {alone['makespan_h']} h "
          f"(wall {time.monotonic() - started:.1f} s)")
    return float(packed["gpu_hours"]) / max(1e-9, float(alone["gpu_hours"]))


def main() -> int:
    args = _args()
    if args.sim_only:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"GPU-hours, pack: auto ÷ unpacked, simulated: {simulated(Path(tmp), args):.3f}")
        return 0
    tag = uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "gpu-memory").mkdir()
        profile = f"packbench-{tag}"
        alone = run("unpacked", f"packbench-alone-{tag}", profile, "", root, args)
        packed = run("pack-auto", f"packbench-auto-{tag}", profile, "auto", root, args)
        sim_ratio = simulated(root, args)
    print(f"\n{args.configs} configs, toy trainer holding {args.gpu_mb} MB of a 40960 MB (fake) GPU, "
          f"{args.steps} steps of 1 s")
    print(f"{'run':<11}{'completed':>10}{'attempts':>9}{'makespan s':>11}{'GPU-h (sacct)':>14}"
          f"{'GPU-h counted':>14}")
    for r in (alone, packed):
        print(f"{r['label']:<11}{r['completed']:>10}{r['attempts']:>9}{r['makespan_s']:>11}{r['gpu_hours']:>14}"
              f"{r['counted_gpu_hours']:>14}")
    for reason in packed["packs"]:  # type: ignore[attr-defined]
        print(f"pack decision: {reason}")
    ratio = float(packed["gpu_hours"]) / max(1e-9, float(alone["gpu_hours"]))  # type: ignore[arg-type]
    same = alone["ranking"] == packed["ranking"]
    print(f"GPU-hours allocated, pack: auto ÷ unpacked: {ratio:.3f}; "
          f"makespan ratio {float(packed['makespan_s']) / max(1.0, float(alone['makespan_s'])):.2f}; "  # type: ignore[arg-type]
          f"ranking by final val_loss {'identical' if same else 'DIFFERENT'} (best: {alone['ranking'][0]})")  # type: ignore[index]
    print(f"GPU-hours, pack: auto ÷ unpacked, simulated at {args.sim_tasks} tasks: {sim_ratio:.3f}")
    return 0 if same else 1


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20, help="seconds each trainer runs (one report a second)")
    parser.add_argument("--gpu-mb", type=int, default=8192, help="GPU memory each trainer holds on the fake NVML")
    parser.add_argument("--tick", type=float, default=5.0, help="seconds between reconcile ticks")
    parser.add_argument("--limit", type=float, default=1200.0, help="give up a run after this many seconds")
    parser.add_argument("--sim-tasks", type=int, default=10_000, help="tasks of the simulated comparison")
    parser.add_argument("--sim-only", action="store_true", help="only the simulator's figures (no cluster needed)")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
