"""The MLflow run of a task (adapters/tracker_runs.py), with MLflow's own local file store: made
by the first attempt, continued by the next, and a tracker that cannot be reached never fails the
attempt."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from campaignctl.adapters.tracker_runs import mlflow_run
from campaignctl.core.task_launch import TaskLaunch


def launch_in(tmp_path: Path) -> TaskLaunch:
    task = tmp_path / "runs" / "c" / "tasks" / "0"
    return TaskLaunch(campaign="c", task_index=0, attempt_token="t.0", argv=("true",), env={}, workdir=str(tmp_path),
                      task_dir=str(task), run_id="c-0123456789-0", mlflow_run_file=str(task / "mlflow_run_id"))


def test_the_first_attempt_makes_the_run_and_the_next_continues_it(tmp_path: Path) -> None:
    launch = launch_in(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": "file:./mlruns", "MLFLOW_EXPERIMENT_NAME": "lab",
           "MLFLOW_ALLOW_FILE_STORE": "true"}
    made, line = mlflow_run(launch, env)
    assert made and line.startswith(f"campaignctl: MLflow run {made} made for this task")
    # in the store the program's working directory names (a relative file: URI), under its experiment
    run = next((tmp_path / "mlruns").glob(f"*/{made}"))
    assert "run_name: c-0123456789-0" in (run / "meta.yaml").read_text()
    assert "name: lab" in (run.parent / "meta.yaml").read_text()  # its experiment, made by name
    again, line = mlflow_run(launch, env)
    assert again == made and line.startswith(f"campaignctl: continuing MLflow run {made}")
    assert len(list((tmp_path / "mlruns").glob("*/*/meta.yaml"))) == 1


def test_an_unreachable_tracker_leaves_the_program_to_make_its_own_run(tmp_path: Path) -> None:
    env = {**os.environ, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
           "MLFLOW_HTTP_REQUEST_TIMEOUT": "2"}
    made, line = mlflow_run(launch_in(tmp_path), env)
    assert made is None and line.startswith("campaignctl: no MLflow run made for this task (")
    assert line.endswith("the program makes its own\n") and not Path(launch_in(tmp_path).mlflow_run_file).exists()


def test_tasks_starting_together_each_get_a_run_under_the_one_experiment_they_name(tmp_path: Path) -> None:
    """The experiment is made by whichever first attempt gets there first; the others find it
    (CI once saw "Experiment 'lab' already exists." leave one task without its run)."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": "file:./mlruns", "MLFLOW_EXPERIMENT_NAME": "together",
           "MLFLOW_ALLOW_FILE_STORE": "true"}
    launches = [replace(launch_in(tmp_path), task_index=i, run_id=f"c-0123456789-{i}",
                        mlflow_run_file=str(tmp_path / "runs" / "c" / "tasks" / str(i) / "mlflow_run_id"))
                for i in range(6)]
    with ThreadPoolExecutor(len(launches)) as pool:
        made = list(pool.map(lambda launch: mlflow_run(launch, env), launches))
    assert all(run_id for run_id, _ in made), [line for _, line in made]
    assert len({run_id for run_id, _ in made}) == 6
    experiments = [p for p in (tmp_path / "mlruns").iterdir() if (p / "meta.yaml").exists()]
    assert [p for p in experiments if "name: together" in (p / "meta.yaml").read_text()] and len(experiments) <= 2
