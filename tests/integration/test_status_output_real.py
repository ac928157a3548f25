"""The daily surface on the real cluster: a task that fails with a traceback, `output NAME 0`
prints it, the give-up decision in `log` names the file, `status` at 80 columns on the live
campaign, `output -f` follows a running task to its end, and `status` with slurmdbd unreachable
(sacct pointed at a port nobody listens on) shows the stored state, marked stale, at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import status
from campaignctl.services.status_reads import STATUS_SACCT_TRIES
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import wait_for
from tests.integration.test_top_real import counting_shims

pytestmark = pytest.mark.slurm
NAME = "status16-surface"

PROGRAM = """\
import os, sys, time
if sys.argv[1] == "bug":
    print("loading shards", flush=True)
    raise ValueError("shape mismatch: expected 64, got 32")
for step in range(25):
    print(f"step {step}", flush=True)
    time.sleep(1)
waited = 0
while not os.path.exists("release") and waited < 300:  # running until the test has looked at it
    time.sleep(1)
    waited += 1
print("done", flush=True)
"""


def given_up(name: str) -> list[str]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return [e.reason for e in DecisionLog(store.engine).entries(record.id, actions=("give_up",))]


def unreachable_dbd(slurm_conf: str, tmp_path: Path) -> str:
    """A copy of the cluster's config whose slurmdbd port nobody listens on: sacct then fails
    with "Problem talking to the database: Connection refused", as with slurmdbd down."""
    etc = tmp_path / "etc-nodbd"
    etc.mkdir()
    for conf in Path(slurm_conf).parent.glob("*.conf"):
        shutil.copy(conf, etc / conf.name)
    text = (etc / "slurm.conf").read_text().splitlines()
    (etc / "slurm.conf").write_text("\n".join("AccountingStoragePort=1" if line.startswith("AccountingStoragePort=")
                                              else line for line in text) + "\n")
    return str(etc / "slurm.conf")


def test_a_failed_tasks_traceback_its_give_up_and_status_at_80_columns(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM)
    submit(write_spec(tmp_path, f"""\
name: {NAME}
command: [python3, prog.py, "{{mode}}"]
tasks: [{{mode: bug}}, {{mode: slow}}]
resources: {{cpus_per_task: 1, mem: 200M, time: "00:05:00"}}
"""))

    def settled() -> bool:
        reconcile(NAME)
        rows = {r.index: r.state for r in status(NAME).tasks}
        return bool(given_up(NAME)) and rows.get(1) == "RUNNING"
    wait_for("task 0 given up while task 1 runs", settled, timeout_s=300)

    shown = cli("output", NAME, "0")
    assert shown.returncode == 0, shown.stderr
    assert "loading shards\nTraceback (most recent call last):" in shown.stdout
    # the program's last line ends it; the runner's own `campaignctl: GPU telemetry off: …` note is
    # written by the sampler's thread as it starts, so a program that fails at once may precede it
    # (CI run 21, both Slurms, with Debian's Python 3.11.2)
    program = [line for line in shown.stdout.splitlines() if not line.startswith("campaignctl: ")]
    assert program[-1] == "ValueError: shape mismatch: expected 64, got 32"
    path = cli("output", NAME, "0", "--path").stdout.strip()
    assert path.startswith(str(tmp_path / "runs" / NAME / "tasks" / "0")) and path.endswith("/output.log")
    (reason,) = given_up(NAME)
    assert reason.endswith(f"Output: {path}")
    logged = cli("log", NAME, "--task", "0")
    assert logged.returncode == 0 and f"Output:{path}" in "".join(logged.stdout.split())

    narrow = cli("status", NAME, env_extra={"COLUMNS": "80"})
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    rows = {line.split()[0]: line.split() for line in lines if line[:4].strip().isdigit() and len(line.split()) > 3}
    assert rows["0"][:5] == ["0", "FAILED", "1", rows["0"][3], "1"] and "give_up" in rows["0"]
    assert rows["1"][:2] == ["1", "RUNNING"] and rows["1"][4] == "-"  # no exit code while it runs

    calls = tmp_path / "slurm-calls.log"
    stale = cli("status", NAME, env_extra={"COLUMNS": "80", "SLURM_CONF": unreachable_dbd(slurm_conf, tmp_path),
                                           "PATH": counting_shims(tmp_path / "shims", calls)})
    assert stale.returncode == 0, stale.stderr
    flat = " ".join(stale.stdout.split())
    assert "stale: Slurm unreachable (`sacct" in flat and "Problem talking to the database" in flat
    assert "UTC (last tick)" in flat and " 1 RUNNING 1 " in flat  # the stored state
    # at once: one retry, not four tries with backoff (it was exit 75 after 13 s); `sacct --version`
    # once where the version is not known yet
    asked = [line for line in calls.read_text().splitlines() if line.startswith("sacct ") and "--version" not in line]
    assert len(asked) == STATUS_SACCT_TRIES, asked

    (tmp_path / "release").touch()
    followed = cli("output", NAME, "1", "-f")  # until the job ends
    assert followed.returncode == 0, followed.stderr
    # the runner's own note may fall between the program's lines (its sampler thread writes it)
    lines = [line for line in followed.stdout.splitlines() if not line.startswith("campaignctl: ")]
    assert lines[:2] == ["step 0", "step 1"] and lines[-2:] == ["step 24", "done"], followed.stdout
