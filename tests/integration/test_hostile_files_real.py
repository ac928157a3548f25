"""Issue 26, on the real cluster: a running job writes into its own attempt directory what once
stopped every tick (a 309-digit integer and deep nesting in its telemetry and metrics files, a FIFO
for exit.json); a cron tick `reconcile --all` (the crontab line's environment) still exits 0 and
retries another campaign's failure."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from campaignctl.adapters.store import Store
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.cron_path import CRON_PATH
from tests.integration.test_reconcile_real import HERE, history, wait_for

pytestmark = pytest.mark.slurm
PROGRAM = Path(sys.executable).parent / "campaignctl"
# the job's own program: hostile lines into the files the runner and the tick share, then a FIFO
# where the runner writes exit.json, and a long sleep so the attempt stays RUNNING
HOSTILE = """\
import os, time
big = "9" * 309
deep = "[" * 100000 + "]" * 100000
with open(os.environ["CAMPAIGNCTL_METRICS"], "a") as f:
    f.write('{"step": %s, "loss": 1}\\n' % big + deep + "\\n")
tele = os.path.join(os.path.dirname(os.environ["CAMPAIGNCTL_METRICS"]), "telemetry.jsonl")
with open(tele, "a") as f:
    f.write('{"t": 1.7e9, "cpu_pct": 1, "rss_mb": %s}\\n' % big + deep + "\\n" + '{"t": NaN}\\n')
open(os.path.join(os.path.dirname(tele), "hostile-written"), "w").close()
time.sleep(600)
"""


def test_reconcile_all_retries_another_campaigns_failure_beside_a_hostile_attempt_directory(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    hostile, flaky = f"hostile-{uuid.uuid4().hex[:6]}", f"flaky-{uuid.uuid4().hex[:6]}"
    (tmp_path / "hostile.py").write_text(HOSTILE)
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    resources = '{cpus_per_task: 1, mem: 100M, time: "00:05:00"}'
    submit(write_spec(tmp_path, f"name: {hostile}\ncommand: [python3, hostile.py]\nresources: {resources}\n",
                      f"{hostile}.yaml"))
    submit(write_spec(tmp_path, f"name: {flaky}\ncommand: [python3, chaos.py, flaky]\nresources: {resources}\n"
                                "policy: {use: default, rules: {failed: {backoff: 0}}}\n", f"{flaky}.yaml"))
    attempt = tmp_path / "runs" / hostile / "tasks" / "0" / history(hostile)[0].token
    wait_for("the hostile job to write its files", lambda: (attempt / "hostile-written").exists(), 120)
    (attempt / "exit.json").unlink(missing_ok=True)
    os.mkfifo(attempt / "exit.json")
    env = {"HOME": str(tmp_path), "PATH": CRON_PATH, "SLURM_CONF": slurm_conf,
           "XDG_STATE_HOME": str(state_home)}
    codes = []

    def retried() -> bool:
        tick = subprocess.run([str(PROGRAM), "reconcile", "--all"], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)  # a FIFO once hung it: the timeout fails the test
        codes.append((tick.returncode, tick.stderr[-500:]))
        return len(history(flaky)) == 2
    wait_for(f"{flaky}'s failure to be retried", retried, 150)
    assert all(code == 0 for code, _ in codes), codes
    store = Store.open()
    record = store.campaign(hostile)
    assert record is not None and record.state == "active"
    assert history(hostile)[0].state == "RUNNING"
    status = subprocess.run([str(PROGRAM), "status", hostile], env=env, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0 and "failed on this campaign" not in status.stdout
    subprocess.run([str(PROGRAM), "cancel", hostile], env=env, capture_output=True, timeout=120)
