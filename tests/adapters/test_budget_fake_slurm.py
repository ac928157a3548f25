"""The budget guard through reconcile and resume against a fake Slurm: one hold per tick at most,
a refused resume, and a forced one that the next tick does not undo."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import ConflictError
from campaignctl.services.reconcile import reconcile
from campaignctl.services.resume import resume
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeJob, FakeSlurm

# three 1-GPU tasks with a 1-hour limit against 0.5 GPU-h: one running attempt commits ~1 GPU-h
SPEC = """\
name: tight
command: [python3, train.py]
matrix: {seed: [0, 1, 2]}
resources: {gpus: 1, time: "01:00:00"}
budget: {gpu_hours: 0.5}
"""


def holds(fake: FakeSlurm) -> list[tuple[str, ...]]:
    return [a for a in fake.argvs if a[:2] == ("scontrol", "hold")]


def over_budget(directory: Path, fake: FakeSlurm) -> FakeJob:
    """`tight` submitted: one element running, two pending; the next tick holds them."""
    submit(write_spec(directory, SPEC))
    [job] = fake.live_jobs()
    fake.set_state(job.job_id, 0, "RUNNING")
    for i in (1, 2):
        fake.set_state(job.job_id, i, "PENDING", nodes="None assigned")
    return job


def test_reconcile_holds_once_resume_is_refused_and_a_forced_resume_sticks(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    job = over_budget(tmp_path, fake_slurm)

    reconcile("tight")
    assert holds(fake_slurm) == [("scontrol", "hold", f"{job.job_id}_[1,2]")]
    store = Store.open()
    record = store.campaign("tight")
    assert record is not None and record.state == "paused"

    reconcile("tight")  # paused: observed, but nothing held twice, nothing resubmitted
    assert len(holds(fake_slurm)) == 1 and fake_slurm.submitted == 1

    with pytest.raises(ConflictError, match="still over its budget"):
        resume("tight")
    result = resume("tight", force=True, reason="finish the sweep anyway")
    assert (result.state, result.released, result.status) == ("active", {job.job_id: [1, 2]}, "applied")
    assert ("scontrol", "release", f"{job.job_id}_[1,2]") in fake_slurm.argvs

    reconcile("tight")  # still over the same limit, but forced: not held again
    assert len(holds(fake_slurm)) == 1
    record = store.campaign("tight")
    assert record is not None and record.state == "active"
    actions = [e.action for e in DecisionLog(store.engine).entries(record.id)]
    assert actions.count("hold") == 1 and actions.count("release") == 1 and "alert" in actions


def test_status_spend_agrees_with_the_task_table_not_the_last_tick(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    """Issue 28: with every task COMPLETED in the table, the spend line still said "committed"
    (the last tick had seen them RUNNING) and a done campaign "spent 0"."""
    from campaignctl.services.status import status
    submit(write_spec(tmp_path, SPEC.replace("budget: {gpu_hours: 0.5}", "budget: {gpu_hours: 100}")))
    array = min(fake_slurm.jobs, key=int)
    for index in range(3):
        fake_slurm.set_state(array, index, "RUNNING", "0:0", "node1")
    reconcile("tight")  # the store now says RUNNING, committing up to the 1-hour limit
    for index in range(3):
        fake_slurm.set_state(array, index, "COMPLETED", "0:0", "node1")
    shown = status("tight")
    assert {r.state for r in shown.tasks} == {"COMPLETED"}
    assert shown.spend is not None
    assert shown.spend.committed["gpu_hours"] == 0 and shown.spend.projected["gpu_hours"] == 0
    assert shown.spend.spent["gpu_hours"] == pytest.approx(3 * 3 / 3600)  # sacct's 00:00:03 each
