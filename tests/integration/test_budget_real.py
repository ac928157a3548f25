"""Budget guardrails on the real cluster: the budget runs out, reconcile holds the pending work
and pauses the campaign; resume is refused until the budget is raised, then releases it."""

from __future__ import annotations

import time
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
from tests.integration.test_reconcile_real import ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm

# Six 1-GPU tasks of 12 s with a 1-minute limit, two at a time. One task at its limit costs
# 1/60 GPU-h; 0.02 GPU-h pays for one, so the first tick that sees work running must hold the rest.
SPEC = """\
name: budget
command: [python3, -c, "import time; time.sleep(12)"]
matrix: {{seed: [0, 1, 2, 3, 4, 5]}}
resources: {{gpus: 1, mem: 100M, time: "00:01:00"}}
array: {{max_parallel: 2}}
budget: {{gpu_hours: {gpu_hours}, warn_at: 0.5}}
telemetry: {{interval: 0}}
"""


def queue() -> dict[str, tuple[str, str]]:
    """This user's `budget` elements: job id → (state, reason)."""
    out = proc.run(["squeue", "--me", "-r", "-h", "-o", "%i|%T|%r|%j"]).stdout
    return {i: (st, r) for i, st, r, name in (line.split("|") for line in out.splitlines()) if name.endswith(".budget")}


def state_of(name: str) -> str:
    record = Store.open().campaign(name)
    assert record is not None
    return record.state


def test_budget_runs_out_pending_work_is_held_and_resume_releases_it_after_a_raise(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC.format(gpu_hours=0.02), "budget.yaml")
    submit(spec)
    wait_for("an element to run", lambda: any(s == "RUNNING" for s, _ in queue().values()), 60)

    wait_for("the budget hold", lambda: reconcile("budget") is not None and state_of("budget") == "paused", 30)
    store = Store.open()
    record = store.campaign("budget")
    assert record is not None
    log = DecisionLog(store.engine)
    [hold] = log.entries(record.id, actions=("hold",))
    assert hold.status == "applied" and hold.rule == "budget" and hold.task_index == -1
    assert hold.inputs["dimension"] == "gpu_hours" and hold.inputs["limit"] == 0.02
    assert "budget reached" in hold.reason
    held = {f"{a}_{i}" for a, indices in hold.detail["held"].items() for i in indices}  # type: ignore[union-attr]
    assert len(held) == 4  # two running, four pending: all four held
    assert any(e.action == "alert" for e in log.entries(record.id))  # the 50 % warning came first

    # the running ones finish; the held ones stay pending, held, however long we wait
    wait_for("the running elements to end", lambda: all(s == "PENDING" for s, _ in queue().values()), 60)
    time.sleep(4)
    reconcile("budget")
    jobs = queue()
    assert set(jobs) == held and all(s == "PENDING" and r.startswith("JobHeld") for s, r in jobs.values()), jobs
    assert state_of("budget") == "paused"

    shown = status("budget").spend
    assert shown is not None and shown.exhausted and shown.limits == {"gpu_hours": 0.02}
    assert "budget reached" in cli("status", "budget").stdout

    refused = cli("resume", "budget")
    assert refused.returncode == 5 and "still over its budget" in refused.stderr, refused.stderr

    write_spec(tmp_path, SPEC.format(gpu_hours=1.0), "budget.yaml")  # raise the budget: revision 2
    assert cli("submit", str(spec)).returncode == 0
    resumed = cli("resume", "budget", "--json", "--reason", "raised to 1 GPU-h")
    assert resumed.returncode == 0, resumed.stderr
    assert state_of("budget") == "active"
    [release] = DecisionLog(store.engine).entries(record.id, actions=("release",))
    assert release.status == "applied" and "raised to 1 GPU-h" in release.reason
    assert not any(r.startswith("JobHeld") for _, r in queue().values())

    ticking_until_finished("budget", timeout_s=180)
    rows = Store.open().history(record.id)
    assert len(rows) == 6 and {r.state for r in rows} == {"COMPLETED"}  # the held ones ran, once each
