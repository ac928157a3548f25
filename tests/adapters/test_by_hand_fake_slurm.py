"""`cancel` and `retry` against the fake Slurm: what is sent to Slurm (one scancel per element
of our own jobs, one new array for the retried tasks), what the log records, and how the
campaign ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters.history_store import HistoryStore
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import ConflictError, NotFoundError
from campaignctl.core.governance.replay import actual_decisions, not_replayed
from campaignctl.services.approvals import approve
from campaignctl.services.by_hand import cancel, retry
from campaignctl.services.reconcile import reconcile
from campaignctl.services.replay import replay_policy
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.fakeslurm import FakeSlurm


def campaign(tmp_path: Path, name: str = "hand", tasks: int = 3) -> str:
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, "{{i}}", "--attempt={{attempt}}"]
matrix: {{i: {list(range(tasks))}}}
resources: {{mem: 1G, time: "00:10:00"}}
""", name=f"{name}.yaml"))
    return name


def state_of(name: str) -> str:
    record = Store.open().campaign(name)
    assert record is not None
    return record.state


def scancels(fake: FakeSlurm) -> list[tuple[str, ...]]:
    return [argv for argv in fake.argvs if argv[0] == "scancel"]


def test_cancelling_tasks_stops_their_elements_and_nothing_retries_them(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path)
    array = min(fake_slurm.jobs, key=int)
    for i in range(3):
        fake_slurm.set_state(array, i, "RUNNING")
    reconcile(name)
    result = cancel(name, [0, 2], "diverged")
    assert [(d["task"], d["action"], d["status"]) for d in result.decisions] == [(0, "stop", "applied"),
                                                                                 (2, "stop", "applied")]
    assert scancels(fake_slurm) == [("scancel", f"{array}_0"), ("scancel", f"{array}_2")]
    assert result.state == "active"
    tick = reconcile(name).campaigns[0]
    assert tick.decisions == []  # CANCELLED by our own stop: answered, not retried
    stops = [e for e in logged(name) if e.action == "stop"]
    assert {(e.task_index, e.rule, e.inputs["by"]) for e in stops} == {(0, "manual", stops[0].inputs["by"]),
                                                                         (2, "manual", stops[0].inputs["by"])}
    assert "diverged" in stops[0].reason
    fake_slurm.set_state(array, 1, "COMPLETED")
    assert reconcile(name).campaigns[0].state == "finished"


def test_cancelling_the_campaign_ends_it_cancelled_once_its_jobs_have_ended(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path)
    array = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(array, 0, "RUNNING")
    fake_slurm.set_state(array, 1, "PENDING")
    fake_slurm.set_state(array, 2, "FAILED", "3:0")
    reconcile(name)  # task 2: the policy gives it up (exit 3)
    result = cancel(name)
    assert result.state == "cancelling"
    assert {(d["task"], d["action"]) for d in result.decisions} == {(0, "stop"), (1, "stop")}
    assert [s["task"] for s in result.skipped] == [2]
    with pytest.raises(ConflictError, match="is cancelling: nothing to cancel"):
        cancel(name)  # a second cancel sends and logs no second stop
    again = cancel(name, [0, 1])
    assert again.decisions == [] and {s["why"] for s in again.skipped} == {"already being stopped (RUNNING)",
                                                                          "already being stopped (PENDING)"}
    assert sum(e.action == "stop" for e in logged(name)) == 2 and len(scancels(fake_slurm)) == 2
    assert reconcile().campaigns[0].state == "cancelled"  # `--all` still ticks a cancelling campaign
    assert reconcile().campaigns == []  # and no more once cancelled
    with pytest.raises(ConflictError, match="cancelled: nothing to cancel"):
        cancel(name)


def test_retry_runs_given_up_and_cancelled_tasks_again_under_the_current_revision(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path)
    array = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(array, 0, "FAILED", "3:0")
    fake_slurm.set_state(array, 1, "RUNNING")
    fake_slurm.set_state(array, 2, "COMPLETED")
    reconcile(name)
    cancel(name, [1])
    assert reconcile(name).campaigns[0].state == "finished"
    # the fix: a new revision with more memory
    spec = (tmp_path / f"{name}.yaml").read_text().replace("mem: 1G", "mem: 2G")
    (tmp_path / f"{name}.yaml").write_text(spec)
    submit(tmp_path / f"{name}.yaml")
    with pytest.raises(NotFoundError, match="no task 7"):
        retry(name, [7])
    result = retry(name, None, ["failed", "CANCELLED"], "fixed the data path")
    assert [(d["task"], d["action"], d["status"]) for d in result.decisions] == [(0, "retry", "applied"),
                                                                                 (1, "retry", "applied")]
    assert result.state == "active"
    new = max(fake_slurm.jobs, key=int)
    sbatch = [argv for argv in fake_slurm.argvs if argv[0] == "sbatch" and "--hold" in argv][-1]
    script = Path(sbatch[-1]).read_text()
    assert "--mem=2048M" in script and "--array=0-1" in script and "--attempt=2" in "".join(
        p.read_text(errors="replace") for p in Path(sbatch[-1]).parent.glob("*") if p.is_file())
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    second = [a for a in store.attempts(record.id) if a.attempt_number == 2]
    assert sorted(a.task_index for a in second) == [0, 1]
    skipped = retry(name, [0, 2]).skipped  # 0 is queued again, 2 completed
    assert [(s["task"], s["why"].split(";")[0]) for s in skipped] == [(0, "its attempt 2 is SUBMITTED"),
                                                                    (2, "completed")]
    fake_slurm.finish(new)
    assert reconcile(name).campaigns[0].state == "finished"
    # a person's decisions are history to `policy replay`, not the policy's to reproduce
    history = HistoryStore(store.engine).campaign_history(record)
    assert all(d.rule != "manual" for d in actual_decisions(history))
    assert not_replayed(history)["retry"] == 2
    replayed = replay_policy("default", name)  # the policy's own decisions, reproduced around the person's
    assert replayed.identical and replayed.reproduced == 2, replayed.differences  # and the start


def test_a_retry_above_the_approval_limits_waits_for_approve(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, """\
name: gated
command: [python3, train.py, "{i}"]
matrix: {i: [0]}
resources: {mem: 1G, time: "00:10:00"}
policy: {use: default, approval: {max_mem: 512M}}
""", name="gated.yaml"))
    array = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(array, 0, "FAILED", "3:0")
    reconcile("gated")  # given up: exit 3 is a bug
    jobs = len(fake_slurm.jobs)
    result = retry("gated", [0])
    assert [(d["action"], d["status"]) for d in result.decisions] == [("retry", "awaiting-approval")]
    assert len(fake_slurm.jobs) == jobs  # nothing submitted before a person approves
    [waiting] = [e for e in logged("gated") if e.action == "retry"]
    assert "above approval limit" in waiting.gate
    approve(waiting.id, "ok")
    assert len(fake_slurm.jobs) == jobs + 1


def test_a_retry_the_spent_budget_cannot_pay_for_is_refused_unless_forced(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, """\
name: broke
command: [python3, train.py, "{i}"]
matrix: {i: [0]}
resources: {mem: 1G, time: "00:10:00"}
budget: {cpu_hours: 0.01}
""", name="broke.yaml"))
    array = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(array, 0, "FAILED", "3:0", elapsed="01:00:00")
    reconcile("broke")
    with pytest.raises(ConflictError, match="has spent its budget"):
        retry("broke", [0])
    assert [d["status"] for d in retry("broke", [0], force=True).decisions] == ["applied"]


def test_cancelling_the_campaign_drops_a_submission_still_waiting_for_room(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.max_array_size, fake_slurm.max_submit = 2, 2  # tasks 0-1 go out, 2-3 wait for room
    name = campaign(tmp_path, tasks=4)
    [array] = fake_slurm.jobs
    for i in range(2):
        fake_slurm.set_state(array, i, "RUNNING")
    result = cancel(name, None, "wrong data")
    assert {(d["task"], d["action"]) for d in result.decisions} == {(0, "stop"), (1, "stop"), (2, "give_up"),
                                                                     (3, "give_up")}
    assert len(result.abandoned) == 1 and result.skipped == []
    gave_up = [e for e in logged(name) if e.action == "give_up"]
    assert all(e.rule == "manual" and "had not reached Slurm" in e.reason for e in gave_up)
    assert reconcile(name).campaigns[0].state == "cancelled"
    assert list(fake_slurm.jobs) == [array]  # the waiting array never went out
    assert [t.state for t in status(name).tasks] == ["CANCELLED", "CANCELLED", "ABANDONED", "ABANDONED"]
