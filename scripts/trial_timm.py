#!/usr/bin/env python3
"""A trial on the local real cluster with a trainer nobody here wrote: timm's own `train.py`,
unmodified, in a faults campaign (issue 40). Prints what happened to each attempt.

The campaign trains resnet10t on a small random ImageFolder, 2 tasks (3 and 40 epochs), first
attempts at `mem: 400M` (timm peaks at ~500 MB RSS on CPU):
  - both first attempts are OOM-killed before any checkpoint: the default policy retries them
    with 1.5× the memory, and each retry starts over (no `--resume`: nothing to resume from);
  - once the 40-epoch task's retry has written its first checkpoint (`last.pth.tar`), its time
    limit is set to 0 (`scontrol update TimeLimit=0`: TIMEOUT within ~30 s, NOTES.md): the policy
    retries it with a longer limit, and that attempt resumes (`--resume <checkpoint>`), which timm
    confirms with "Loaded checkpoint '…' (epoch N)".
The spec writes timm's own flags directly: `"{resume?--resume}", "{resume?{checkpoint_dir}/run/last.pth.tar}"`
with `checkpoint: "{checkpoint_dir}/run/last.pth.tar"`. Reconciled every 5 s from `env -i` with
what a crontab line sets.

timm is installed from a source tree (default: the mirror of huggingface/pytorch-image-models,
`--timm-src`) with huggingface_hub and safetensors from PyPI, into a directory of its own on
PYTHONPATH. torchvision: the only build for torch 2.13 the registries here hold is PyPI's 0.28.0
CUDA wheel, whose C++ ops do not load under the CPU torch; its import registers fake kernels for
`torchvision::nms` and `qnms` and fails where those ops do not exist, so a sitecustomize declares
the two schemas (nothing timm's training runs calls them). That is the environment, not timm.

Usage: eval "$(scripts/slurmlab env)"; .venv/bin/python scripts/trial_timm.py [--timm-src DIR] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGNCTL = Path(sys.executable).with_name("campaignctl")
MIRROR = Path("/work/.mirror/huggingface+pytorch-image-models/repo")
# cron's PATH, after the directory of the Slurm clients in use (a site's `module load slurm`;
# `campaignctl cron install` writes the submitter's PATH on its line)
CRON_PATH = ":".join(dict.fromkeys([os.path.dirname(shutil.which("sbatch") or "/usr/bin/sbatch"), "/usr/bin", "/bin"]))
SHIM = '''\
# torchvision 0.28.0's CUDA wheel under a CPU torch: its C++ ops do not load, and its import
# registers fake kernels for these two ops, which fails where they were never declared.
import torch
_TORCHVISION_OPS = torch.library.Library("torchvision", "DEF")
_TORCHVISION_OPS.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_TORCHVISION_OPS.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
'''
SPEC = """\
name: {name}
command: [{python}, {timm}/train.py, --data-dir, {data}, --model, resnet10t, --input-size, "3", "32", "32",
          --batch-size, "8", --epochs, "{{epochs}}", --num-classes, "2", --workers, "1", --device, cpu,
          --no-prefetcher, --log-interval, "2", --output, "{{checkpoint_dir}}", --experiment, run,
          "{{resume?--resume}}", "{{resume?{{checkpoint_dir}}/run/last.pth.tar}}"]
env: {{PYTHONPATH: "{shim}:{lib}", OMP_NUM_THREADS: "1"}}
checkpoint: "{{checkpoint_dir}}/run/last.pth.tar"
run_dir: {run_dir}
matrix: {{epochs: [3, 40]}}
resources: {{cpus_per_task: 1, mem: 400M, time: "00:10:00"}}
telemetry: {{interval: 0}}
metrics:
  from_output:
    - 'Train: (?P<step>\\d+) \\[.*\\(100%\\)\\]\\s+Loss:\\s+\\S+ \\((?P<loss>[0-9.]+)\\)'
"""


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True, **kw)  # type: ignore[call-overload]


def install(work: Path, timm_src: Path | None) -> tuple[Path, Path, str]:
    """timm and what it imports, into `work/lib`; the torchvision shim into `work/shim`."""
    lib, shim, src = work / "lib", work / "shim", work / "timm-src"
    if timm_src is None:
        src.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", f"--git-dir={MIRROR}", "archive", "HEAD"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
        commit = run(["git", f"--git-dir={MIRROR}", "rev-parse", "HEAD"]).stdout.strip()
    else:
        src = timm_src
        commit = run(["git", "-C", str(src), "rev-parse", "HEAD"]).stdout.strip()
    if not (lib / "timm").exists():
        pip = [sys.executable, "-m", "pip", "install", "-q", "--target", str(lib)]
        run([*pip, "--no-deps", str(src)])
        run([*pip, "huggingface_hub", "safetensors", "pyyaml"])
        run([*pip, "--no-deps", "torchvision==0.28.0"])
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "sitecustomize.py").write_text(SHIM)
    return src, lib, commit


def dataset(data: Path) -> None:
    """48 training and 16 validation images of 32×32, two classes (bright and dark noise)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, count in (("train", 48), ("validation", 16)):
        for cls, scale in (("a", 200), ("b", 100)):
            folder = data / split / cls
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count // 2):
                Image.fromarray((rng.random((32, 32, 3)) * scale).astype("uint8")).save(folder / f"{i}.png")


def reconcile(name: str, state: Path) -> None:
    env = {"HOME": os.environ.get("HOME", "/root"), "LOGNAME": os.environ.get("LOGNAME", "root"),
           "PATH": CRON_PATH, "SHELL": "/bin/sh", "SLURM_CONF": os.environ["SLURM_CONF"], "XDG_STATE_HOME": str(state)}
    done = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), str(CAMPAIGNCTL), "reconcile", name],
                          capture_output=True, text=True, timeout=180, check=False)
    if done.returncode not in (0, 1):  # 1: something needs attention
        print(f"reconcile exited {done.returncode}: {done.stderr.strip()}", flush=True)


def status(name: str, state: Path) -> dict:
    shown = run([str(CAMPAIGNCTL), "status", name, "--json"], env={**os.environ, "XDG_STATE_HOME": str(state)})
    return dict(json.loads(shown.stdout)["data"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timm-src", type=Path, help="a timm checkout (default: the mirror's HEAD)")
    parser.add_argument("--work", type=Path, help="where to install, train and keep state (default: a new temp dir)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for the campaign")
    args = parser.parse_args()
    if "SLURM_CONF" not in os.environ:
        sys.exit('SLURM_CONF is not set: eval "$(scripts/slurmlab env)" first')
    work = args.work or Path(tempfile.mkdtemp(prefix="trial-timm-", dir="/var/tmp"))
    src, lib, commit = install(work, args.timm_src)
    print(f"timm {commit} from {src}; work dir {work}", flush=True)
    dataset(work / "data")
    name = f"timm-faults-{uuid.uuid4().hex[:6]}"
    state, run_dir = work / "state", work / "runs" / name
    spec = work / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name, python=sys.executable, timm=src, data=work / "data",
                                shim=work / "shim", lib=lib, run_dir=run_dir))
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    print(run([str(CAMPAIGNCTL), "submit", str(spec)], env=env).stdout, flush=True)
    checkpoint = run_dir / "tasks" / "1" / "checkpoint" / "run" / "last.pth.tar"
    shortened, deadline = None, time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        reconcile(name, state)
        shown = status(name, state)
        task1 = next((t for t in shown["tasks"] if t["index"] == 1), {})
        if shortened is None and checkpoint.exists() and task1.get("state") == "RUNNING" and task1.get("job_id"):
            shortened = task1["job_id"]
            run(["scontrol", "update", f"JobId={shortened}", "TimeLimit=0"])
            print(f"task 1 wrote {checkpoint.name}: time limit of {shortened} set to 0", flush=True)
        if shown["campaigns"][0]["state"] == "finished":
            break
        time.sleep(5)
    print(run([str(CAMPAIGNCTL), "status", name, "--wide"], env=env).stdout)
    print(run([str(CAMPAIGNCTL), "log", name], env=env).stdout)
    for task in (0, 1):
        for attempt in sorted((run_dir / "tasks" / str(task)).glob("*/output.log"), key=lambda p: p.stat().st_mtime):
            lines = attempt.read_text(errors="replace").splitlines()
            said = [line for line in lines if line.startswith("campaignctl: ") or "Loaded checkpoint" in line
                    or "oom" in line.lower() or "Killed" in line]
            print(f"--- task {task}, {attempt.parent.name}: {len(lines)} lines; " + " | ".join(said[:6]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
