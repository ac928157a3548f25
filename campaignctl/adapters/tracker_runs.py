"""Job side: the MLflow run of a task, made by its first attempt and continued by the rest
(core/model/tracker.py says why MLflow needs this and W&B does not).

The run is created in a child Python (the runner's own interpreter, with the program's environment
and working directory), so that `MLFLOW_TRACKING_URI`, `MLFLOW_EXPERIMENT_NAME` and a relative
`file:` store mean what they mean to the program, and so that importing MLflow (seconds, and its
own logging) stays out of the runner. Its id is kept in the config's `mlflow_run_id` file, written
once: an attempt that finds it reuses it. An attempt that cannot create the run (MLflow not
importable, the tracking server down) says so in its output and starts the program without
`MLFLOW_RUN_ID`: the program then makes a run of its own, as it would without campaignctl — a
tracker outage never fails a training attempt."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from campaignctl.core.task_launch import TaskLaunch

CREATE_TIMEOUT_S = 120
# MlflowClient.create_run under the experiment the environment names (MLFLOW_EXPERIMENT_NAME, made
# if missing; or MLFLOW_EXPERIMENT_ID; else MLflow's default experiment "0"); prints the run id.
# A campaign's first attempts start together: all find no experiment, one makes it, the others'
# create_experiment raises "Experiment '…' already exists." and they read it again. MLflow's file
# store checks the name and writes the experiment's directory in two steps, so two at once made two
# experiments of one name (seen in this project's tests under load): there, the lookup and the
# making hold a POSIX lock (which NFS carries) on a file in the store. A database store's UNIQUE
# name constraint does that itself.
_CREATE = """\
import contextlib, fcntl, os, sys
from urllib.parse import urlparse
import mlflow
from mlflow import MlflowClient
client = MlflowClient()
name, eid = os.environ.get("MLFLOW_EXPERIMENT_NAME"), os.environ.get("MLFLOW_EXPERIMENT_ID")
uri = urlparse(mlflow.get_tracking_uri())
@contextlib.contextmanager
def alone():
    if uri.scheme not in ("", "file"):
        yield
        return
    os.makedirs(uri.path, exist_ok=True)
    with open(os.path.join(uri.path, ".campaignctl-experiment.lock"), "a") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        yield
if name:
    with alone():
        found = client.get_experiment_by_name(name)
        if found is None:
            try:
                eid = client.create_experiment(name)
            except Exception:
                found = client.get_experiment_by_name(name)
                if found is None:
                    raise
    eid = found.experiment_id if found is not None else eid
run = client.create_run(eid or "0", run_name=sys.argv[1], tags={"campaignctl.campaign": sys.argv[2],
                                                                 "campaignctl.run_id": sys.argv[3]})
print(run.info.run_id)
"""


def mlflow_run(launch: TaskLaunch, env: Mapping[str, str]) -> tuple[str | None, str]:
    """(the run id to continue, a line for the output log). None: no run to give the program."""
    path = Path(launch.mlflow_run_file)
    if not path.parent.is_dir():  # the config's task directory: made by its first attempt's runner
        path.parent.mkdir(parents=True, exist_ok=True)
    known = _read(path)
    if known:
        return known, f"campaignctl: continuing MLflow run {known} ({path})\n"
    try:
        made = subprocess.run([sys.executable, "-c", _CREATE, launch.run_id, launch.campaign, launch.run_id],
                              cwd=launch.workdir, env=dict(env), capture_output=True, text=True,
                              timeout=CREATE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"campaignctl: no MLflow run made for this task ({exc}); the program makes its own\n"
    run_id = made.stdout.strip().splitlines()[-1] if made.returncode == 0 and made.stdout.strip() else ""
    if not run_id:
        last = (made.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"campaignctl: no MLflow run made for this task ({last}); the program makes its own\n"
    try:  # O_EXCL: two first attempts at once (a by-hand retry beside a tick's) keep one id
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        kept = _read(path) or run_id
        return kept, f"campaignctl: continuing MLflow run {kept} ({path})\n"
    with os.fdopen(fd, "w") as out:
        out.write(run_id + "\n")
    return run_id, f"campaignctl: MLflow run {run_id} made for this task ({path})\n"


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
