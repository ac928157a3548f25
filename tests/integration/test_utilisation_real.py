"""Utilisation rules end to end on the real cluster: a task keeps its CPU busy while its GPU
idles (NVML faked at the pynvml import for the job: the lab's GPUs are /dev/null clones; the CPU
figures are real). reconcile calls it data-starved, gives its pending siblings more CPUs in place
(`scontrol update NumCPUs=2 CPUsPerTask=2`), and those siblings then really run on 2 CPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import latest, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm
FAKE_NVML = Path(__file__).parent / "fake_nvml"
# spins until the test has seen task 0 flagged while it runs (it writes `stop`), 90 s at most: a
# fixed 14 s ended before a loaded CI's ticks got there (CI run 25, 22.05)
SPIN = ("import os, time\nend = time.time() + 90\nwhile time.time() < end and not os.path.exists('stop'):\n"
        "    now = time.time()\n    while time.time() < now + 0.05: pass\n")


def test_a_data_starved_task_gets_its_pending_siblings_more_cpus(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FAKE_NVML))  # sbatch exports the environment to the job
    (tmp_path / "spin.py").write_text(SPIN)
    submit(write_spec(tmp_path, """\
name: starved
command: [python3, spin.py]
matrix: {seed: [0, 1, 2]}
resources: {gpus: 1, cpus_per_task: 1, mem: 200M, time: "00:05:00"}
array: {max_parallel: 1}
telemetry: {interval: 1s}
policy:
  use: default
  utilisation: {window: 6s, gpu_low_pct: 20, cpu_busy_pct: 25, data_starved: {action: more_cpus, max_cpus: 2}}
""", "starved.yaml"))
    store = Store.open()
    record = store.campaign("starved")
    assert record is not None
    log = DecisionLog(store.engine)

    def starved() -> bool:
        reconcile("starved")
        return any(e.rule == "data_starved" for e in log.entries(record.id))
    wait_for("a data_starved decision", starved, 180)

    entries = [e for e in log.entries(record.id) if e.rule == "data_starved"]
    [trigger] = [e for e in entries if e.action == "resize_next"]
    assert trigger.task_index == 0 and trigger.status == "applied"
    window = trigger.inputs["window"]
    # busy at 25 %, not the default 80: CI runs both Slurms' suites and the unit suites at once on
    # 2 cores, and the spinner got less than 80 % of its CPU there (two CI runs, both Slurms), and
    # in one run less than 40 % for a minute (no decision within 60 s)
    assert window["gpu_mean_pct"] == 3 and window["cpu_mean_pct"] >= 25, window  # type: ignore[index]
    assert "data-starved" in trigger.reason and "cpus_per_task 1 → 2" in trigger.reason
    siblings = sorted(e.task_index for e in entries if e.action == "resize_pending")
    assert siblings == [1, 2] and all(e.status == "applied" for e in entries)

    shown_to_user = status("starved")  # task 0 still spins: flagged, with its recent GPU use
    row = shown_to_user.tasks[0]
    assert row.state == "RUNNING" and row.flag == "data_starved" and set(row.spark) == {"▁"}, row
    assert shown_to_user.spend is not None and shown_to_user.spend.spent["gpu_hours"] > 0
    status_cli = cli("status", "starved", "--wide", env_extra={"COLUMNS": "250"})  # the flag is a --wide column
    assert "data-starved" in status_cli.stdout and "gpu_hours:" in status_cli.stdout, status_cli.stdout

    pending = latest("starved")[1].job_id
    shown = proc.run(["scontrol", "show", "job", str(pending)]).stdout
    assert "NumCPUs=2" in shown and "CPUs/Task=2" in shown, shown
    (tmp_path / "stop").touch()  # the spinners end (task 0 now, its siblings as they start)

    ticking_until_finished("starved", timeout_s=150)
    cpus = {t: json.loads(next((tmp_path / "runs" / "starved" / "tasks" / str(t)).glob("*/started.json"))
                          .read_text())["cpus"] for t in range(3)}
    assert len(cpus[0]) == 1 and len(cpus[1]) == 2 and len(cpus[2]) == 2, cpus  # the resize reached the task
