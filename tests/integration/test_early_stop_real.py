"""Early stopping on the real cluster: five configs report val_loss with campaignctl.report();
reconcile stops the one that trails its peers (scancel --state=RUNNING of that element), the
others complete, and the campaign finishes without retrying or giving up the stopped one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import LoggedDecision
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.integration.test_real_cluster import cli, own_jobs_named
from tests.integration.test_reconcile_real import history, latest, sacct_field, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm
NAME = "es-real"
TRAILING = 3

# Every config's loss is scale/step. The good ones share scale 1.0, so each ties with the median of
# its peers and none is stopped; config 3 (scale 3.0) trails from the first step. Its steps are a
# little slower, so its peers have reached its latest step by the time a tick compares them.
TOY = """\
import json, os, sys, time
config = int(sys.argv[1])
scale, pause = (3.0, 0.7) if config == 3 else (1.0, 0.5)
try:
    from campaignctl import report
except ImportError:  # the job's python lacks campaignctl: append the same lines by hand
    def report(step, **metrics):
        with open(os.environ["CAMPAIGNCTL_METRICS"], "a") as f:
            f.write(json.dumps({"step": step, **metrics, "t": time.time()}) + "\\n")
for step in range(1, 41):
    time.sleep(pause)
    report(step=step, val_loss=scale / step)
print("done", config)
"""


def stops(name: str) -> list[LoggedDecision]:
    return [e for e in logged(name) if e.action == "stop"]


def test_the_trailing_config_is_cancelled_on_its_metrics_and_the_others_complete(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    (tmp_path / "toy.py").write_text(TOY)
    submit(write_spec(tmp_path, f"""\
name: {NAME}
command: ["{sys.executable}", toy.py, "{{config}}"]
matrix: {{config: [0, 1, 2, 3, 4]}}
resources: {{cpus_per_task: 1, mem: 200M, time: "00:05:00"}}
policy:
  use: default
  early_stopping: {{metric: val_loss, goal: min, grace_steps: 5, min_peers: 3}}
""", f"{NAME}.yaml"))
    try:
        wait_for("an early-stopping decision", lambda: bool(reconcile(NAME) and stops(NAME)), timeout_s=60)
        ticking_until_finished(NAME, timeout_s=60)
    finally:
        for row in latest(NAME).values():
            if row.job_id and row.state in ("PENDING", "RUNNING", "SUBMITTED"):
                proc.run(["scancel", row.job_id.split("_")[0]], check=False)

    [stop] = stops(NAME)
    rows = latest(NAME)
    job = rows[TRAILING].job_id or ""
    print(f"\n{stop.reason}\nsacct {job}: {sacct_field(job, 'JobID,State,ExitCode,Elapsed')}")
    assert (stop.task_index, stop.rule, stop.status, stop.mode) == (TRAILING, "early_stopping", "applied", "enforce")
    assert stop.inputs["job_id"] == job and stop.detail == {"job_id": job, "only_if": "RUNNING", "sent": True}
    step = int(stop.inputs["step"])  # type: ignore[call-overload]
    assert step >= 5 and stop.inputs["value"] == pytest.approx(3.0 / step)
    assert stop.inputs["median"] == pytest.approx(1.0 / step) and int(stop.inputs["peer_count"]) >= 3  # type: ignore[call-overload]
    assert f"val_loss {3.0 / step:.4g} at step {step} is worse than the median {1.0 / step:.4g}" in stop.reason
    assert sacct_field(job, "State").startswith("CANCELLED")
    assert {t: r.state for t, r in rows.items()} == {0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED",
                                                      TRAILING: "CANCELLED", 4: "COMPLETED"}
    assert all(sacct_field(r.job_id or "", "State") == "COMPLETED" for t, r in rows.items() if t != TRAILING)
    assert len(history(NAME)) == 5  # no retry
    store = Store.open()
    record = store.campaign(NAME)
    assert record is not None and record.state == "finished"
    assert [e.action for e in logged(NAME)] == ["stop"]  # no give_up (after the first array's start)
    shown = cli("log", NAME, "--inputs")
    assert shown.returncode == 0 and "early_stopping → stop applied" in shown.stdout, shown.stdout
    wait_for("its jobs to leave the queue", lambda: not own_jobs_named(NAME), timeout_s=30)
