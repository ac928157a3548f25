"""A training stand-in for the program-output causes test (no GPU needed: the lab's GPUs are
fake). `--batch N` above FITS prints a real recorded PyTorch CUDA OOM traceback
(tests/fixtures/output/torch24_cuda_oom_then_second_exception.txt, copied next to it as
oom.txt) and exits 1, as PyTorch does; at or below FITS it trains a few steps and exits 0.
`--fail nccl` prints a real NCCL watchdog timeout instead. `--fits-on node1,node2`: it fits
only on those nodes (the lab's a100 nodes), whatever the batch."""

import argparse
import os
import sys
from pathlib import Path

FITS = 16

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, required=True)
parser.add_argument("--grad-accum", type=int, required=True)
parser.add_argument("--fail", default="oom")
parser.add_argument("--fits-on", default="")
args = parser.parse_args()
node = os.environ.get("SLURMD_NODENAME", "")
print(f"batch={args.batch} grad_accum={args.grad_accum} effective={args.batch * args.grad_accum} node={node}",
      flush=True)
here = Path(__file__).parent
if args.fail == "nccl":
    sys.stderr.write((here / "nccl.txt").read_text())
    sys.exit(1)
too_big = node not in args.fits_on.split(",") if args.fits_on else args.batch > FITS
if too_big:
    print("step 0 | loss 2.31 | max memory allocated 61.2 GiB", flush=True)
    sys.stderr.write((here / "oom.txt").read_text())
    sys.exit(1)
for step in range(3):
    print(f"step {step} | loss {2.3 - step * 0.1:.2f}", flush=True)
