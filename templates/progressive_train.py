"""A toy training run for progressive campaigns: it "trains" for --steps steps, reports a
deterministic loss every step with `campaignctl.report`, checkpoints its step, and in a later
rung ($CAMPAIGNCTL_RESUME set) carries on from the checkpoint instead of starting over.

Each config converges to its own floor at its own speed, so the ranking after a few steps is not
the ranking after many: what successive halving has to live with.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

try:
    from campaignctl import report
except ImportError:  # campaignctl is not importable where the job runs: write the same line by hand
    def report(step: int, **metrics: float) -> None:
        path = os.environ.get("CAMPAIGNCTL_METRICS")
        if path:
            with open(path, "a") as out:
                out.write(json.dumps({"step": step, **metrics, "t": time.time()}) + "\n")


def loss_at(config: int, step: int) -> float:
    floor = ((config * 7) % 16) / 16  # where this config converges
    slowness = 0.5 + ((config * 11) % 16) / 4  # how long it takes to get there
    return round(floor + slowness / (step + 1), 6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--step-time", type=float, default=0.25, help="seconds per step")
    args = parser.parse_args()
    checkpoint = Path(os.environ.get("CAMPAIGNCTL_CHECKPOINT_DIR", ".")) / "toy.json"
    start = 0
    if os.environ.get("CAMPAIGNCTL_RESUME") and checkpoint.exists():
        start = json.loads(checkpoint.read_text())["step"]
    print(f"config {args.config}: steps {start + 1}..{args.steps}", flush=True)
    for step in range(start + 1, args.steps + 1):
        time.sleep(args.step_time)
        report(step=step, loss=loss_at(args.config, step))
        partial = checkpoint.with_suffix(".tmp")
        partial.write_text(json.dumps({"step": step}))
        os.replace(partial, checkpoint)


if __name__ == "__main__":
    main()
