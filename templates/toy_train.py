"""A toy training script for demos and tests: 'trains' for a few seconds, checkpoints, reports.

It reads only the standard library, prints what Slurm gave it, appends a metric line to
$CAMPAIGNCTL_METRICS and resumes from $CAMPAIGNCTL_CHECKPOINT_DIR if a checkpoint exists.
"""

import argparse
import json
import math
import os
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--depth", type=int, required=True)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=0.5)
    parser.add_argument("--mb-per-layer", type=int, default=0,
                        help="hold depth × this many MB, like activations (deep nets may OOM)")
    args = parser.parse_args()
    activations = bytearray(args.depth * args.mb_per_layer * 2**20)  # zero-filled: really resident
    print(f"node={os.environ.get('SLURMD_NODENAME')} gpus={os.environ.get('CUDA_VISIBLE_DEVICES')} "
          f"cpus={sorted(os.sched_getaffinity(0))}", flush=True)
    ckpt = Path(os.environ.get("CAMPAIGNCTL_CHECKPOINT_DIR", ".")) / "state.json"
    step = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    loss = 1.0
    while step < args.steps:
        time.sleep(args.step_seconds)
        step += 1
        loss = math.exp(-args.lr * step) + 0.01 * args.depth
        ckpt.write_text(json.dumps({"step": step}))
        print(f"step {step} loss {loss:.4f}", flush=True)
    metrics = os.environ.get("CAMPAIGNCTL_METRICS")
    if metrics:
        with open(metrics, "a") as out:
            out.write(json.dumps({"step": step, "loss": loss}) + "\n")
    del activations


if __name__ == "__main__":
    main()
