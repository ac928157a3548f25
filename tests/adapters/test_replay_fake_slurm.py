"""`policy replay` over a campaign run to completion against the fake Slurm: the policy that ran
reproduces every recorded decision; a changed policy shows exactly what it would do otherwise."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.replay import ReplayResult, replay_policy
from campaignctl.services.submit import submit
from tests.conftest import REPO, write_spec
from tests.fakeslurm import FakeSlurm

DEFAULT = REPO / "policies" / "default.yaml"
T0 = datetime.now().replace(microsecond=0)
# task index → (sacct state, exit code, node, End) in the first array
FIRST = {0: ("OUT_OF_MEMORY", "0:125", "node1", ""), 1: ("TIMEOUT", "0:0", "node2", ""),
         2: ("FAILED", "75:0", "node1", (T0 - timedelta(seconds=30)).isoformat()),  # backoff 1m: tick 2
         3: ("FAILED", "3:0", "node1", ""), 4: ("PREEMPTED", "0:0", "node4", ""),
         5: ("PENDING", "0:0", "", ""), 6: ("PENDING", "0:0", "", ""), 7: ("COMPLETED", "0:0", "node3", "")}


def run_campaign(tmp_path: Path, fake: FakeSlurm) -> None:
    """Tick 1: OOM/TIMEOUT/PREEMPTED resubmitted, exit 3 given up, pending 5 and 6 resized, exit 75
    waits out its backoff. Tick 2: 5 and 6 done, the exit-75 task resubmitted, task 1's retry
    times out again and is resubmitted. Tick 3: every retry done, the campaign finishes."""
    submit(write_spec(tmp_path, f"""\
name: rp
command: [python3, train.py, "{{i}}"]
matrix: {{i: [0, 1, 2, 3, 4, 5, 6, 7]}}
resources: {{mem: 1G, time: "00:10:00", gpus: 1}}
policy: {DEFAULT}
""", "rp.yaml"))
    first = min(fake.jobs, key=int)
    for index, (state, code, node, end) in FIRST.items():
        fake.set_state(first, index, state, code, node, end)
    assert len(reconcile("rp", now=T0).campaigns[0].decisions) == 6
    timeout_retry = max(j for j in fake.jobs if _elements(fake, j) == 1 and _retry_of(j, 1))
    fake.set_state(timeout_retry, 0, "TIMEOUT", "0:0", "node2")
    for index in (5, 6):
        fake.set_state(first, index, "COMPLETED", "0:0", "node3")
    assert len(reconcile("rp", now=T0 + timedelta(minutes=2)).campaigns[0].decisions) == 2
    assert reconcile("rp", now=T0 + timedelta(minutes=3)).campaigns[0].state == "finished"


def _elements(fake: FakeSlurm, job: str) -> int:
    return fake.jobs[job].size


def _retry_of(job: str, task: int) -> bool:
    store = Store.open()
    record = store.campaign("rp")
    assert record is not None
    return any(a.task_index == task and a.array_job_id == job for a in store.attempts(record.id))


@pytest.fixture
def ran(tmp_path: Path, fake_slurm: FakeSlurm) -> Path:
    run_campaign(tmp_path, fake_slurm)
    return tmp_path


def changed_policy(directory: Path) -> Path:
    text = DEFAULT.read_text().replace("""  out_of_memory:
    action: resubmit""", """  out_of_memory:
    action: give_up""").replace("time_factor: 1.5", "time_factor: 3")
    text = text.replace("gpu_hour: {default: 0}", "gpu_hour: {default: 2.0}")
    assert text.count("give_up") > DEFAULT.read_text().count("give_up")
    path = directory / "changed.yaml"
    path.write_text(text)
    return path


def test_replaying_the_policy_that_ran_reproduces_every_recorded_decision(ran: Path) -> None:
    result = replay_policy(str(DEFAULT), "rp")
    store = Store.open()
    record = store.campaign("rp")
    assert record is not None
    logged = DecisionLog(store.engine).entries(record.id)
    kinds = sorted((e.task_index, e.rule, e.action) for e in logged)
    # the first array is the submit tick's start decision: replayed from what that tick saw
    assert kinds == [(0, "out_of_memory", "resubmit"), (0, "start", "start"), (1, "timeout", "resubmit"),
                     (1, "timeout", "resubmit"), (2, "failed", "resubmit"), (3, "failed", "give_up"),
                     (4, "preempted", "resubmit"), (5, "timeout", "resize_pending"), (6, "timeout", "resize_pending")]
    assert result.ticks == 4 and result.actual_decisions == len(logged) == 9
    assert result.differences == [] and result.identical
    assert result.reproduced == result.replayed_decisions == 9
    assert result.recorded_policies == [f"default@v1 ({result.policy_digest})"]
    assert result.cost_delta.cpu_hours == 0 and result.actual_cost == result.replay_cost
    # five resubmits, 1 GPU and 1 CPU each, at 10 + 15 + 10 + 10 + 23 minutes
    assert result.actual_cost.gpu_hours == pytest.approx(68 / 60)


def test_a_changed_policy_shows_exactly_where_it_differs_and_what_it_would_cost(ran: Path) -> None:
    result = replay_policy(str(changed_policy(ran)), "rp")
    diffs = {(d.task_index, d.attempt, d.replay.action if d.replay else None): d for d in result.differences}
    assert sorted(diffs) == [(0, 1, "give_up"), (1, 1, "resubmit"), (1, 2, "resubmit"),
                             (5, 1, "resize_pending"), (6, 1, "resize_pending")]
    assert all(d.kind == "changed" and d.note == "" for d in result.differences)
    oom = diffs[(0, 1, "give_up")]
    assert oom.actual is not None and oom.actual.action == "resubmit" and oom.actual.rule == "out_of_memory"
    first, second = diffs[(1, 1, "resubmit")], diffs[(1, 2, "resubmit")]
    assert first.actual and first.replay and second.actual and second.replay
    assert (first.actual.changes, first.replay.changes) == ({"time_min": [10, 15]}, {"time_min": [10, 30]})
    # history after the divergence is the recorded one: the second attempt had 15 minutes
    assert (second.actual.changes, second.replay.changes) == ({"time_min": [15, 23]}, {"time_min": [15, 45]})
    resize = diffs[(5, 1, "resize_pending")]
    assert resize.actual and resize.replay
    assert resize.actual.changes == {"mem_mb": [1024, 1536], "time_min": [10, 15]}
    assert resize.replay.changes == {"time_min": [10, 30]}
    assert result.reproduced == 4  # the start; exit 3 given up, preemption and exit 75 resubmitted
    # priced with the replayed policy (2.0 per GPU-hour) on both sides: no OOM retry (-10 min) but
    # longer timeout retries (+15, +22 min)
    assert result.actual_cost.gpu_hours == pytest.approx(68 / 60)
    assert result.replay_cost.gpu_hours == pytest.approx(95 / 60)
    assert result.cost_delta.gpu_hours == pytest.approx(27 / 60) and result.cost_delta.money == pytest.approx(0.9)
    assert _is_report(result)


def _is_report(result: ReplayResult) -> bool:
    return any("history after a divergence" in c for c in result.caveats)
