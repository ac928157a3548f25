"""`campaignctl.report(step=…, **metrics)`: what a training script calls to report metrics.

Standard library only, so a job can import it without the CLI's dependencies. Each call appends
one JSON line to `$CAMPAIGNCTL_METRICS` (set by the job-side runner for every attempt) with a
single `write` on an O_APPEND descriptor, so a reader never sees half a line from a finished
call. Outside campaignctl (the variable unset) it does nothing, so the same script runs by hand.
Scripts in other languages append the same lines themselves:
  {"step": 100, "loss": 0.41, "t": 1764000000.0}
"""

from __future__ import annotations

import json
import math
import os
import time

METRICS_ENV = "CAMPAIGNCTL_METRICS"


def report(step: int, **metrics: float) -> None:
    """Record `metrics` (name=number) at training `step`, e.g. `report(step=100, val_loss=0.41)`."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
    if not metrics:
        raise ValueError("report() needs at least one metric, e.g. report(step=10, loss=0.5)")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"metric {name!r} must be a finite number, got {value!r}")
    path = os.environ.get(METRICS_ENV)
    if not path:
        return
    line = json.dumps({"step": step, **{k: float(v) for k, v in metrics.items()}, "t": time.time()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
