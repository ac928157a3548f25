"""A toy trainer for packing on the lab cluster: it holds GPU memory on the fake NVML
(tests/integration/fake_nvml: a file FAKE_NVML_DIR/<node>/<gpu>/<pid> with the MB), reports a
val_loss that is a known function of its config for STEPS steps of a second each, and ends.

    toy_trainer.py LR WIDTH [--gpu-mb MB] [--host-mb MB] [--steps N] [--dropout D]
                   [--slow-on NODE --slow-factor F]

val_loss at the last step is (log10(LR) + 3)² + (WIDTH - 64)² / 4096 + 1 / step: the best config
is LR 1e-3, WIDTH 64. --host-mb touches that much host memory first (a task that outgrows its
memory limit). --slow-on makes each step F times as long on that node (SLURMD_NODENAME): the lab's
slow-but-alive node, for the node ledger's slow-node rule.

With --dropout (the search tests), val_loss at the last step is 1 plus each parameter's squared
distance from the optimum as a fraction of its search range (LR log-uniform 1e-5..1e-1, WIDTH
16..256, DROPOUT 0..0.5): the optimum, 1.0, is at LR 3e-3, WIDTH 96, DROPOUT 0.1."""

import argparse
import math
import os
import time
from pathlib import Path

from campaignctl import report

parser = argparse.ArgumentParser()
parser.add_argument("lr", type=float)
parser.add_argument("width", type=int)
parser.add_argument("--gpu-mb", type=float, default=8192)
parser.add_argument("--host-mb", type=int, default=0)
parser.add_argument("--steps", type=int, default=15)
parser.add_argument("--dropout", type=float, default=None)
parser.add_argument("--slow-on", default="")
parser.add_argument("--slow-factor", type=float, default=3.0)
args = parser.parse_args()
step_s = args.slow_factor if args.slow_on and os.environ.get("SLURMD_NODENAME") == args.slow_on else 1.0

held = None
gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")[0]
if gpu and os.environ.get("FAKE_NVML_DIR"):
    folder = Path(os.environ["FAKE_NVML_DIR"]) / os.environ.get("SLURMD_NODENAME", "") / gpu
    folder.mkdir(parents=True, exist_ok=True)
    held = folder / str(os.getpid())
    held.write_text(str(args.gpu_mb))
block = bytearray(args.host_mb * 2**20)
for i in range(0, len(block), 4096):
    block[i] = 1
try:
    for step in range(1, args.steps + 1):
        time.sleep(step_s)
        if args.dropout is None:
            loss = (math.log10(args.lr) + 3) ** 2 + (args.width - 64) ** 2 / 4096 + 1 / step
        else:
            loss = (1 + ((math.log10(args.lr) - math.log10(3e-3)) / 4) ** 2 + ((args.width - 96) / 240) ** 2
                    + ((args.dropout - 0.1) / 0.5) ** 2 + (args.steps - step) / args.steps)
        report(step=step, val_loss=loss)
finally:
    if held is not None:
        held.unlink(missing_ok=True)
