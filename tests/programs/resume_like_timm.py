"""A trainer that resumes as timm's train.py does (huggingface/pytorch-image-models, commit
041de79f9e8728c26469e04570ad9c5963ca73c6): it writes `args.yaml` into its output directory at
start, saves `<output>/last.pth.tar` after each epoch, and on `--resume PATH` loads PATH or stops
with timm's own words (timm/models/_helpers.py resume_checkpoint: `_logger.error("No checkpoint
found at '{}'")`, then `raise FileNotFoundError()`). Not timm's code: its behaviour at the points
a retry depends on, without torch.

    resume_like_timm.py MODE --output DIR [--resume PATH]

MODE oom_first_epoch: attempt 1 allocates past its memory limit before its first save.
MODE slow: saves epoch 0, then trains for ever (the test provokes the TIMEOUT).
Either way a run that gets there saves epoch 1 and exits 0.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("mode")
parser.add_argument("--output", required=True)
parser.add_argument("--resume", default="")
args = parser.parse_args()
output = pathlib.Path(args.output)
output.mkdir(parents=True, exist_ok=True)
(output / "args.yaml").write_text(f"mode: {args.mode}\n")
print(f"argv: {sys.argv[1:]} attempt={os.environ.get('CAMPAIGNCTL_ATTEMPT')}", flush=True)

start_epoch = 0
if args.resume:
    if not os.path.isfile(args.resume):
        print(f"ERROR: No checkpoint found at '{args.resume}'", file=sys.stderr, flush=True)
        raise FileNotFoundError()
    start_epoch = int(pathlib.Path(args.resume).read_text()) + 1
    print(f"Loaded checkpoint '{args.resume}' (epoch {start_epoch - 1})", flush=True)


def save(epoch: int) -> None:
    tmp = output / "last.pth.tar.tmp"
    tmp.write_text(str(epoch))
    tmp.rename(output / "last.pth.tar")


if start_epoch == 0 and args.mode == "oom_first_epoch" and os.environ.get("CAMPAIGNCTL_ATTEMPT") == "1":
    block = bytearray(400 * 2**20)  # past a 250M limit: OUT_OF_MEMORY before any save
    time.sleep(5)
if start_epoch == 0 and args.mode == "slow":
    save(0)
    print("Train: 0 [done]", flush=True)
    time.sleep(600)
save(max(start_epoch, 1))
print(f"*** Best metric: 0.5 (epoch {max(start_epoch, 1)})", flush=True)
