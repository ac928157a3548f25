"""A trainer that logs to W&B and MLflow the way their documentation shows, and resumes from its
own checkpoint: `wandb.init()` and `mlflow.start_run()` with no run named in the code (the run is
the environment's: WANDB_RUN_ID/WANDB_RESUME, MLFLOW_RUN_ID), `log(…, step=step)` per step, and
the step saved to $CAMPAIGNCTL_CHECKPOINT_DIR/step after each one.

    tracked_trainer.py LR [--steps N] [--step-s S]

Each step prints `step N loss X wandb-run ID mlflow-run ID`."""

import argparse
import os
import time
from pathlib import Path

import mlflow
import wandb

parser = argparse.ArgumentParser()
parser.add_argument("lr", type=float)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--step-s", type=float, default=1.0)
args = parser.parse_args()

saved = Path(os.environ["CAMPAIGNCTL_CHECKPOINT_DIR"]) / "step"
start = int(saved.read_text()) + 1 if saved.exists() else 1
run = wandb.init(project="campaignctl-lab", config={"lr": args.lr})
with mlflow.start_run() as active:
    mlflow.log_param("lr", args.lr) if start == 1 else None
    for step in range(start, args.steps + 1):
        time.sleep(args.step_s)
        loss = args.lr / step
        run.log({"loss": loss}, step=step)
        mlflow.log_metric("loss", loss, step=step)
        print(f"step {step} loss {loss:.6f} wandb-run {run.id} mlflow-run {active.info.run_id}", flush=True)
        # After the line: a retry repeats at most the step it printed last. Written aside and renamed,
        # as checkpointing trainers do: a reader (the test, a retry after a kill) never sees it half
        # written (CI once read '' between write_text's truncate and its write).
        partial = saved.with_name("step.partial")
        partial.write_text(str(step))
        os.replace(partial, saved)
run.finish()
