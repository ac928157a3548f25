"""reconcile against a fake Slurm at the subprocess boundary: call counts, crash safety, the
lock, transient faults, lost jobs, pending-sibling resizes. (Real Slurm: tests/integration.)"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.lock import exclusive
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import ticks
from campaignctl.core.base.errors import SlurmTransientError
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, REPO, policy_decisions, write_spec
from tests.crash import Crash, crash_once_at
from tests.fakeslurm import FakeSlurm

# task index → (sacct state, exit code, node) provoked in the first array
FAILURES = {0: ("OUT_OF_MEMORY", "0:125", "node1"), 1: ("FAILED", "1:0", "node1"),
            2: ("TIMEOUT", "0:0", "node2"), 3: ("NODE_FAIL", "0:0", "node3"),
            4: ("PREEMPTED", "0:0", "node4"), 5: ("FAILED", "75:0", "node1")}
RETRIED = {0, 2, 3, 4, 5}  # FAILED 1 is a bug: given up


def campaign(tmp_path: Path, fake: FakeSlurm, tasks: int, name: str = "rc") -> str:
    spec = write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, "{{i}}"]
matrix: {{i: [{", ".join(str(i) for i in range(tasks))}]}}
resources: {{mem: 1G, time: "00:10:00"}}
policy: {{use: default, rules: {{failed: {{backoff: 0}}}}}}
""", name=f"{name}.yaml")
    submit(spec)
    return name


def provoke(fake: FakeSlurm, failures: dict[int, tuple[str, str, str]] = FAILURES) -> str:
    first = min(fake.jobs, key=int)
    for index, (state, code, node) in failures.items():
        fake.set_state(first, index, state, code, node)
    return first


def slurm_mutations(fake: FakeSlurm) -> Counter[str]:
    return Counter({k: v for k, v in fake.calls.items() if k not in ("sacct", "sinfo")})


@pytest.mark.parametrize("tasks", [10, 1200])
def test_a_tick_makes_a_constant_number_of_slurm_calls_whatever_the_campaign_size(
        tmp_path: Path, fake_slurm: FakeSlurm, tasks: int) -> None:
    campaign(tmp_path, fake_slurm, tasks)
    provoke(fake_slurm)
    fake_slurm.calls.clear()
    result = reconcile("rc")
    # 1 sacct, then per action group (4 distinct resource sets: more memory, more time, a node
    # excluded, unchanged) one sbatch --test-only, one sbatch --hold and one release. This process
    # already read MaxArraySize (scontrol show config) at submit, and Slurm took the unchanged
    # resources then (--test-only): neither is asked again (a cron tick is a new process: it asks).
    # A first attempt's OOM or TIMEOUT adds one sinfo: the nodes its raise of pending work is sized by.
    # The node failure's evidence is written to the node ledger under the cluster's name, which
    # submit read already in this process (`scontrol show config`, asked once per process: the
    # submit limit is read from this cluster's association).
    assert dict(fake_slurm.calls) == {"sacct": 1, "scontrol": 4, "sbatch": 3 + 4, "sinfo": 1}
    # and the commands run include `sacct --version` once (the client's own version, no RPC)
    assert result.slurm_calls == 13 + 1
    assert {d.task for d in result.campaigns[0].decisions} == set(FAILURES)


def test_one_decision_per_failure_with_the_resources_the_policy_chose(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 8)
    provoke(fake_slurm)
    reconcile("rc")
    store = Store.open()
    record = store.campaign("rc")
    assert record is not None
    entries = policy_decisions(DecisionLog(store.engine).entries(record.id))
    by_task = {e.task_index: e for e in entries}
    assert sorted(by_task) == sorted(FAILURES) and len(entries) == len(FAILURES)
    assert by_task[0].params["changes"] == {"mem_mb": [1024, 1536]}
    assert by_task[2].params["changes"] == {"time_min": [10, 15]}
    assert by_task[3].params["changes"] == {"exclude": [None, "node3"]}
    assert by_task[1].action == "give_up" and "bug" in by_task[1].reason
    assert all(e.status == "applied" for e in entries)
    assert by_task[0].inputs["slurm_state"] == "OUT_OF_MEMORY" and by_task[0].inputs["exit_code"] == 0
    attempts = Counter(a.task_index for a in store.attempts(record.id))
    assert {t for t, n in attempts.items() if n == 2} == RETRIED


CRASH_POINTS = ["after_decisions", "after_sbatch", "before_release", "before_outcome"]



@pytest.mark.parametrize("point", CRASH_POINTS)
def test_killed_at_any_step_of_the_act_protocol_then_rerun_no_duplicate_no_lost_task(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    campaign(tmp_path, fake_slurm, 8)
    provoke(fake_slurm)
    crash_once_at(monkeypatch, point)
    with pytest.raises(Crash):
        reconcile("rc")
    reconcile("rc")  # repairs
    reconcile("rc")  # and converges: nothing new
    store = Store.open()
    record = store.campaign("rc")
    assert record is not None
    attempts = store.attempts(record.id)
    per_task = Counter(a.task_index for a in attempts)
    assert {t for t, n in per_task.items() if n == 2} == RETRIED
    assert all(n <= 2 for n in per_task.values())
    retry_jobs = {a.array_job_id for a in attempts if a.attempt_number == 2}
    assert all(not fake_slurm.jobs[j].held for j in retry_jobs)  # every retry released
    submitted = [j for j in fake_slurm.jobs.values() if j.job_id != min(fake_slurm.jobs, key=int)]
    assert len(submitted) == len(retry_jobs) == 4  # one job per group, none duplicated
    entries = policy_decisions(DecisionLog(store.engine).entries(record.id))
    assert sorted(e.task_index for e in entries) == sorted(FAILURES)
    assert all(e.status == "applied" for e in entries)


def test_two_reconciles_started_together_exactly_one_acts(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 4)
    provoke(fake_slurm, {0: ("FAILED", "75:0", "node1")})
    second_done = threading.Event()
    fake_slurm.before_sacct = lambda: second_done.wait(COMMAND_TIMEOUT_S)  # the first tick waits inside sacct
    results = []
    first = threading.Thread(target=lambda: results.append(reconcile("rc")))
    first.start()
    while fake_slurm.calls["sacct"] == 0:
        first.join(0.01)
    results.append(reconcile("rc"))
    second_done.set()
    first.join()
    assert sorted(r.status for r in results) == ["locked", "ok"]
    assert fake_slurm.calls["sacct"] == 1 and fake_slurm.submitted == 2  # the submit + 1 retry


def test_cli_exits_0_at_once_when_another_reconcile_holds_the_lock(state_home: Path) -> None:
    with exclusive("reconcile") as holder:
        assert holder is None
        done = subprocess.run([sys.executable, "-m", "campaignctl", "reconcile", "--all"],
                              capture_output=True, text=True, cwd=REPO, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "another reconcile" in done.stdout


def test_slurm_unreachable_the_tick_observes_nothing_decides_nothing_and_exits_75(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 4)
    provoke(fake_slurm)
    fake_slurm.fail_always["sacct"] = "sacct: error: Problem talking to the database: Connection refused"
    with pytest.raises(SlurmTransientError) as caught:
        reconcile("rc")
    assert caught.value.exit_code == 75
    assert fake_slurm.calls["sacct"] == 4  # retried with backoff, then gave up
    store = Store.open()
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(ticks.c.status)).scalars().all()[1:] == ["observed-nothing"]  # after submit's
    assert policy_decisions(DecisionLog(store.engine).entries()) == []


def test_a_job_missing_from_sacct_and_squeue_is_unknown_until_the_grace_period_ends(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 3)
    fake_slurm.vanished.add(min(fake_slurm.jobs, key=int))
    first = reconcile("rc")
    assert first.campaigns[0].decisions == []
    store = Store.open()
    record = store.campaign("rc")
    assert record is not None
    assert {a.state for a in store.attempts(record.id)} == {"UNKNOWN"}
    assert reconcile("rc", now=datetime.now() + timedelta(minutes=5)).campaigns[0].decisions == []
    later = reconcile("rc", now=datetime.now() + timedelta(minutes=11))
    assert [(d.rule, d.action) for d in later.campaigns[0].decisions] == [("lost", "resubmit")] * 3


def test_pending_siblings_of_an_oom_task_get_the_new_memory_in_place(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 5)
    job = provoke(fake_slurm, {0: ("OUT_OF_MEMORY", "0:125", "node1"), 1: ("RUNNING", "0:0", "node2"),
                               2: ("PENDING", "0:0", ""), 3: ("PENDING", "0:0", ""),
                               4: ("PENDING", "0:0", "")})
    result = reconcile("rc")
    actions = Counter(d.action for d in result.campaigns[0].decisions)
    assert actions == {"resubmit": 1, "resize_pending": 3}
    updates = [a for a in fake_slurm.argvs if a[:2] == ("scontrol", "update")]
    assert updates == [("scontrol", "update", f"JobId={job}_[2,3,4]", "MinMemoryNode=1536")]
    store = Store.open()
    record = store.campaign("rc")
    assert record is not None
    mem = {r.task_index: json.loads(r.resources_json)["mem_mb"] for r in store.history(record.id)
           if r.attempt_number == 1}
    assert mem == {0: 1024, 1: 1024, 2: 1536, 3: 1536, 4: 1536}
    # next tick: the siblings already have the memory, so no second resize
    assert reconcile("rc").campaigns[0].decisions == []


def test_a_resize_never_touches_a_job_not_queued_under_the_campaigns_token(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    campaign(tmp_path, fake_slurm, 3)
    job = provoke(fake_slurm, {0: ("OUT_OF_MEMORY", "0:125", "node1"), 1: ("PENDING", "0:0", "")})
    fake_slurm.jobs[job].name = "someone-elses-job"  # what squeue shows for this id now
    result = reconcile("rc")
    resize = [d for d in result.campaigns[0].decisions if d.action == "resize_pending"]
    assert [d.status for d in resize] == ["failed"]
    assert not [a for a in fake_slurm.argvs if a[:2] == ("scontrol", "update")]


def test_dry_run_decides_but_writes_and_mutates_nothing(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 8)
    provoke(fake_slurm)
    fake_slurm.calls.clear()
    result = reconcile("rc", dry_run=True)
    assert {d.status for d in result.campaigns[0].decisions} == {"proposed"}
    assert slurm_mutations(fake_slurm) == Counter()
    store = Store.open()
    assert policy_decisions(DecisionLog(store.engine).entries()) == []
    assert reconcile("rc").campaigns[0].decisions  # the real tick still decides


def test_campaign_becomes_finished_once_every_task_is_settled(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, 3)
    provoke(fake_slurm, {1: ("FAILED", "2:0", "node1")})
    assert reconcile("rc").campaigns[0].state == "finished"
    assert reconcile(None).status == "nothing-to-do"  # --all skips finished campaigns


def test_lowering_max_parallel_mid_flight_throttles_the_live_array_in_place(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    text = """\
name: slow
command: [python3, train.py, "{i}"]
matrix: {i: [0, 1, 2, 3, 4, 5]}
resources: {mem: 1G, time: "00:10:00"}
"""
    submit(write_spec(tmp_path, text, "slow.yaml"))
    job = provoke(fake_slurm, {i: ("PENDING", "0:0", "") for i in range(6)})
    assert reconcile("slow").campaigns[0].decisions == []  # no cap, nothing to do
    submit(write_spec(tmp_path, text + "array: {max_parallel: 2}\n", "slow.yaml"))  # revision 2
    fake_slurm.argvs.clear()
    [decision] = reconcile("slow").campaigns[0].decisions
    assert (decision.rule, decision.action, decision.status) == ("max_parallel", "throttle", "applied")
    assert [a for a in fake_slurm.argvs if a[0] == "scontrol"] == [
        ("scontrol", "update", f"JobId={job}", "ArrayTaskThrottle=2")]
    assert reconcile("slow").campaigns[0].decisions == []  # recorded: not sent again
