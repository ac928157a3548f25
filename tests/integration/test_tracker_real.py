"""Tracker runs that survive a TIMEOUT retry, on the real cluster: a trainer that logs to W&B
(offline: nothing is sent) and to MLflow (its local file store) keeps one run of each per task
across the retry the default policy makes, and its metrics continue from the checkpoint's step."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import REPO, write_spec
from tests.integration.test_reconcile_real import history, latest, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm
STEPS = 30  # 1.5 s each: TimeLimit=0 ends the first attempt 8-26 s after it is set


def test_one_wandb_and_one_mlflow_run_per_task_across_a_timeout_retry(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "integration" / "tracked_trainer.py", tmp_path / "train.py")
    store = tmp_path / "mlruns"
    submit(write_spec(tmp_path, f"""\
name: tracked
command: ["{sys.executable}", train.py, "{{lr}}", --steps, "{STEPS}", --step-s, "1.5"]
matrix: {{lr: [0.1, 0.01]}}
tracker: [wandb, mlflow]
env: {{WANDB_MODE: offline, WANDB_DIR: "{tmp_path}", WANDB_SILENT: "true",
       MLFLOW_TRACKING_URI: "file:{store}", MLFLOW_EXPERIMENT_NAME: lab, MLFLOW_ALLOW_FILE_STORE: "true"}}
resources: {{cpus_per_task: 1, mem: 1500M, time: "00:10:00"}}
"""))
    tasks = tmp_path / "runs" / "tracked" / "tasks"

    def past_step_3() -> bool:
        reconcile("tracked")
        row = latest("tracked").get(0)
        saved = tasks / "0" / "checkpoint" / "step"
        return row is not None and row.state == "RUNNING" and saved.exists() and int(saved.read_text()) >= 3
    wait_for("task 0 to log three steps", past_step_3, 180)
    proc.run(["scontrol", "update", f"JobId={latest('tracked')[0].job_id}", "TimeLimit=0"])
    ticking_until_finished("tracked", 300)

    rows = history("tracked")
    assert {(r.task_index, r.attempt_number): r.state for r in rows} == {
        (0, 1): "TIMEOUT", (0, 2): "COMPLETED", (1, 1): "COMPLETED"}
    logs = {(r.task_index, r.attempt_number): tasks / str(r.task_index) / r.token / "output.log" for r in rows}
    lines = {key: [line.split() for line in log.read_text().splitlines() if line.startswith("step ")]
             for key, log in logs.items()}
    # one W&B run id and one MLflow run id per task, the same on both attempts of task 0
    ids = {key: {(words[5], words[7]) for words in steps} for key, steps in lines.items()}
    assert len(ids[(0, 1)]) == 1 and ids[(0, 1)] == ids[(0, 2)] and ids[(1, 1)] != ids[(0, 1)]
    wandb_id, mlflow_id = next(iter(ids[(0, 1)]))
    # metrics continue: the retry's first step follows the last one the timed-out attempt saved
    first, retry = [int(w[1]) for w in lines[(0, 1)]], [int(w[1]) for w in lines[(0, 2)]]
    assert retry[0] in (first[-1], first[-1] + 1) and retry[-1] == STEPS
    # W&B offline: one directory per attempt, both of the one run (wandb sync uploads it as one)
    offline = sorted(p.name for p in (tmp_path / "wandb").glob(f"offline-run-*-{wandb_id}"))
    assert len(offline) == 2 and all((tmp_path / "wandb" / d / f"run-{wandb_id}.wandb").exists() for d in offline)
    # MLflow: two runs in the store (one per task), task 0's with every step once, in order
    runs = {p.name: p for p in store.glob("*/*") if (p / "meta.yaml").exists()}
    assert sorted(runs) == sorted({mlflow_id, next(iter(ids[(1, 1)]))[1]})
    logged = [int(line.split()[2]) for line in (runs[mlflow_id] / "metrics" / "loss").read_text().splitlines()]
    assert logged[0] == 1 and logged[-1] == STEPS and set(logged) == set(range(1, STEPS + 1))
    assert f"campaignctl: continuing MLflow run {mlflow_id}" in logs[(0, 2)].read_text()
