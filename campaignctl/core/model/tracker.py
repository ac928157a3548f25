"""Experiment trackers (`tracker: wandb | mlflow | [wandb, mlflow]`): one tracker run per task,
the same on every attempt and every rung of its config, so that a preempted, timed-out or promoted
task continues its run instead of starting a new one.

`{run_id}` (every attempt has it, with or without `tracker:`) is the task's identity: stable for
the config of one campaign's run directory, different for another campaign or user (a digest of
the run directory), and made of the characters W&B accepts in a run id (letters, digits, `-`, `_`;
at most 64).

- **W&B** reads its run from the environment (wandb's documented `WANDB_RUN_ID`, `WANDB_RESUME`,
  `WANDB_RUN_GROUP`): `wandb.init()` with `WANDB_RESUME=allow` continues the run of that id if it
  exists and creates it otherwise; offline, each attempt writes its own `offline-run-…-<id>`
  directory, which `wandb sync` uploads as that one run.
- **MLflow** has no run id a client may choose: the first attempt's runner creates the run
  (adapters/tracker_runs.py) and keeps its id beside the config's checkpoint; every attempt gets
  it as `MLFLOW_RUN_ID`, which `mlflow.start_run()` resumes.

What a spec sets itself in `env:` wins over these defaults (e.g. its own `WANDB_RUN_GROUP`)."""

from __future__ import annotations

import hashlib
import posixpath
import re
from functools import lru_cache

from campaignctl.core.base.reader import Reader
from campaignctl.core.model.attempt_paths import TASKS

WANDB, MLFLOW = "wandb", "mlflow"
TRACKERS = (WANDB, MLFLOW)
RUN_ID = "run_id"
MLFLOW_RUN_FILE = "mlflow_run_id"  # <run_dir>/tasks/<config>/mlflow_run_id, beside its checkpoint
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def run_identity(run_dir: str, config: int) -> str:
    """`{run_id}`: `<campaign directory's name>-<digest of the run directory>-<config>`."""
    name, digest = _run_parts(run_dir)
    tail = f"-{digest}-{config}"
    return name[:64 - len(tail)] + tail


@lru_cache(maxsize=16)
def _run_parts(run_dir: str) -> tuple[str, str]:
    """The part of every config's run id its campaign's run directory gives (a submit of 1,000,000
    tasks asked for it 1,000,000 times)."""
    digest = hashlib.sha256(run_dir.encode()).hexdigest()[:10]
    return _UNSAFE.sub("-", posixpath.basename(run_dir.rstrip("/"))).strip("-") or "run", digest


def mlflow_run_file(run_dir: str, config: int) -> str:
    return posixpath.join(run_dir, TASKS, str(config), MLFLOW_RUN_FILE)


def read_trackers(r: Reader, top: dict) -> tuple[str, ...]:
    """`tracker:` as a name or a list of names (each at most once)."""
    value = top.get("tracker")
    if value is None or value == []:
        return ()
    if not isinstance(value, (str, list)):
        r.problem(("tracker",), f"must be one of {', '.join(TRACKERS)} or a list of them, got {type(value).__name__}")
        return ()
    names = [value] if isinstance(value, str) else value
    out: list[str] = []
    for i, name in enumerate(names):
        path = ("tracker",) if isinstance(value, str) else ("tracker", i)
        if name not in TRACKERS:
            r.problem(path, f"{name!r} is not a tracker campaignctl knows; use one of: {', '.join(TRACKERS)}")
        elif name in out:
            r.problem(path, f"{name} is named twice")
        else:
            out.append(name)
    return tuple(out)


def tracker_env(trackers: tuple[str, ...], campaign: str) -> dict[str, str]:
    """The env templates `tracker:` adds (filled per attempt like the spec's own `env:`). MLflow's
    `MLFLOW_RUN_ID` is the runner's to set: the run exists only once its first attempt made it."""
    if WANDB not in trackers:
        return {}
    return {"WANDB_RUN_ID": "{run_id}", "WANDB_RESUME": "allow", "WANDB_RUN_GROUP": campaign}
