"""A Hydra multirun through campaignctl's launcher, on the real cluster: `python my_app.py -m
hydra/launcher=lab optimizer.lr=0.1,0.001 seed=0,1,2` (a 2 × 3 grid; `lab` is campaignctl's launcher
with the app's resources and objective, tests/integration/hydra_app) returns having submitted one
campaign while its six jobs (36 s each) are all still in the queue (how fast it returns is
scripts/bench_hydra.py's to measure: 2.4 s median on an idle lab; 5.2 s once under CI's load);
reconcile from a cron-like environment finishes it; each job's Hydra output directory holds its
own `.hydra/`; a job timed out mid-run is retried by the default policy in the
same directory and resumes its checkpoint; `results` ranks the six; the same command again submits
nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from tests.conftest import REPO
from tests.integration.test_job_env_real import CAMPAIGNCTL, cron_env, reconcile_from_cron
from tests.integration.test_reconcile_real import history, latest, wait_for

pytestmark = pytest.mark.slurm
GRID = ["optimizer.lr=0.1,0.001", "seed=0,1,2"]
TIMED_OUT = 2  # job 2: lr 0.1, seed 2


def hydra_multirun(app: Path) -> tuple[float, str]:
    began = time.monotonic()
    done = subprocess.run([sys.executable, str(app), "-m", "hydra/launcher=lab", *GRID], cwd=app.parent,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return time.monotonic() - began, done.stdout


def test_a_hydra_sweep_is_one_campaign_that_returns_at_once_and_cron_runs_to_the_end(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    shutil.copytree(REPO / "tests" / "integration" / "hydra_app", tmp_path / "app")
    app = tmp_path / "app" / "my_app.py"
    took, said = hydra_multirun(app)
    name = said.split("campaignctl: campaign ", 1)[1].split(":", 1)[0]
    queued = proc.run(["squeue", "-h", "-r", "-o", "%j"]).stdout.split()  # elements named cc.<token>.<campaign>
    assert sum(job.endswith(f".{name}") for job in queued) == 6, f"returned after {took:.1f} s: {queued}"
    assert "6 Hydra job(s) submitted (1 sbatch call(s))" in said and f"campaignctl status {name}" in said
    sweep = next((tmp_path / "app" / "multirun").glob("*/*"))
    cron = cron_env(state_home, slurm_conf)

    def job_saved_3_steps() -> bool:
        reconcile_from_cron(name, cron)
        row = latest(name).get(TIMED_OUT)
        saved = sweep / str(TIMED_OUT) / "checkpoint.txt"
        return row is not None and row.state == "RUNNING" and saved.exists() and int(saved.read_text()) >= 3
    wait_for("job 2 to save its third step", job_saved_3_steps, 180)
    proc.run(["scontrol", "update", f"JobId={latest(name)[TIMED_OUT].job_id}", "TimeLimit=0"])

    def finished() -> bool:
        reconcile_from_cron(name, cron)
        status = subprocess.run([str(CAMPAIGNCTL), "status", name, "--json"], capture_output=True, text=True)
        return json.loads(status.stdout)["data"]["campaigns"][0]["state"] == "finished"
    wait_for(f"{name} to finish under cron's reconcile", finished, 300)

    rows = history(name)
    assert {(r.task_index, r.attempt_number): r.state for r in rows} == {
        **{(t, 1): "COMPLETED" for t in range(6) if t != TIMED_OUT},
        (TIMED_OUT, 1): "TIMEOUT", (TIMED_OUT, 2): "COMPLETED"}
    for job in range(6):  # Hydra's own files, in the directory Hydra gives job N of the sweep
        hydra = sweep / str(job) / ".hydra"
        overrides = (hydra / "overrides.yaml").read_text()
        assert f"optimizer.lr={('0.1', '0.001')[job // 3]}" in overrides and f"seed={job % 3}" in overrides
        assert (hydra / "config.yaml").exists() and (hydra / "hydra.yaml").exists()
    log = (sweep / str(TIMED_OUT) / "my_app.log").read_text()  # both attempts' lines, in Hydra's log format
    assert f"resuming from {sweep / str(TIMED_OUT) / 'checkpoint.txt'} at step " in log and "step 24 loss" in log

    ranked = subprocess.run([str(CAMPAIGNCTL), "results", name, "--json"], capture_output=True, text=True)
    order = [(row["optimizer_lr"], row["seed"]) for row in json.loads(ranked.stdout)["data"]["rows"]]
    assert order == [("0.001", "0"), ("0.001", "1"), ("0.001", "2"), ("0.1", "0"), ("0.1", "1"), ("0.1", "2")]

    took, again = hydra_multirun(app)  # the same command: the same campaign, nothing submitted
    assert f"campaignctl: campaign {name} was submitted before (the same sweep); nothing submitted now" in again
    assert len(history(name)) == 7
