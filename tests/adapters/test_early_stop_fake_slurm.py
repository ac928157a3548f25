"""Early stopping against the fake Slurm: the metrics tasks wrote → one state-filtered scancel of
the trailing element, logged with its evidence; the CANCELLED it causes is settled (no retry, no
give-up) and the campaign finishes. Shadow, approval and a crash in between, too."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from campaignctl.adapters.store import Store
from campaignctl.services.approvals import pending_approvals
from campaignctl.services.reconcile import reconcile
from campaignctl.services.revisions import promote, set_policy
from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.crash import Crash, crash_once_at
from tests.fakeslurm import FakeSlurm

GOOD = [0.9, 0.7, 0.6, 0.55, 0.5]
CURVES = {0: GOOD, 1: GOOD, 2: GOOD, 3: [1.2, 1.1, 1.0, 0.95, 0.9], 4: [0.7, 0.6, 0.55, 0.5, 0.45]}
TRAILING = 3


def campaign(tmp_path: Path, fake: FakeSlurm, extra: str = "", name: str = "es") -> str:
    """Five tasks running, each having reported val_loss for steps 1-5 (task 3 trailing)."""
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, "{{i}}"]
matrix: {{i: [0, 1, 2, 3, 4]}}
resources: {{mem: 1G, time: "00:10:00"}}
policy:
  use: default
  early_stopping: {{metric: val_loss, grace_steps: 3, min_peers: 3{extra}}}
""", name=f"{name}.yaml"))
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    array = min(fake.jobs, key=int)
    for attempt in store.attempts(record.id):
        fake.set_state(array, attempt.task_index, "RUNNING", "0:0", "node1")
        folder = tmp_path / "runs" / name / "tasks" / str(attempt.task_index) / attempt.token
        folder.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps({"step": s, "val_loss": v, "t": 1.0 + s}) for s, v in
                 enumerate(CURVES[attempt.task_index], start=1)]
        (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return name


def scancels(fake: FakeSlurm) -> list[tuple[str, ...]]:
    return [argv for argv in fake.argvs if argv[0] == "scancel"]


def finish_the_others(fake: FakeSlurm) -> None:
    array = min(fake.jobs, key=int)
    for index in CURVES:
        if fake.element(array, index).state == "RUNNING":
            fake.set_state(array, index, "COMPLETED", "0:0", "node1")


def test_the_trailing_task_is_stopped_once_and_the_campaign_finishes_without_retry(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm)
    array = min(fake_slurm.jobs, key=int)
    tick = reconcile("es").campaigns[0]
    assert [(d.task, d.rule, d.action, d.status, d.job_id) for d in tick.decisions] == [
        (TRAILING, "early_stopping", "stop", "applied", f"{array}_{TRAILING}")]
    assert scancels(fake_slurm) == [("scancel", "--state=RUNNING", f"{array}_{TRAILING}")]
    [stop] = logged("es")
    assert stop.reason == ("val_loss 0.9 at step 5 is worse than the median 0.5 of 4 peers at that step "
                           "(lower is better); stopped (median rule).")
    assert (stop.inputs["value"], stop.inputs["median"], stop.inputs["peers"]) == (
        0.9, 0.5, {"0": 0.5, "1": 0.5, "2": 0.5, "4": 0.45})
    assert stop.detail == {"job_id": f"{array}_{TRAILING}", "only_if": "RUNNING", "sent": True}

    assert reconcile("es").campaigns[0].decisions == []  # sacct shows it CANCELLED: settled, not given up
    assert fake_slurm.element(array, TRAILING).state.startswith("CANCELLED")
    finish_the_others(fake_slurm)
    assert reconcile("es").campaigns[0].state == "finished"
    assert [(e.task_index, e.action) for e in logged("es")] == [(TRAILING, "stop")]  # no resubmit, no give_up
    assert len(scancels(fake_slurm)) == 1 and fake_slurm.submitted == 1  # the first array only
    store = Store.open()
    record = store.campaign("es")
    assert record is not None
    assert Counter(a.task_index for a in store.attempts(record.id)) == dict.fromkeys(CURVES, 1)


@pytest.mark.parametrize("point", ["after_decisions", "before_outcome"])
def test_a_crash_between_decision_and_outcome_is_repaired_by_the_next_tick(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    campaign(tmp_path, fake_slurm)
    crash_once_at(monkeypatch, point)
    with pytest.raises(Crash):
        reconcile("es")
    assert reconcile("es").campaigns[0].repaired == 1
    [stop] = logged("es")
    assert (stop.action, stop.status) == ("stop", "applied")
    array = min(fake_slurm.jobs, key=int)
    # carried out once, or twice when the crash came after scancel: state-filtered, so harmless
    assert set(scancels(fake_slurm)) == {("scancel", "--state=RUNNING", f"{array}_{TRAILING}")}
    finish_the_others(fake_slurm)
    assert reconcile("es").campaigns[0].state == "finished" and len(logged("es")) == 1


def test_in_shadow_it_proposes_once_and_never_cancels(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, ", mode: shadow")
    for _ in range(3):
        reconcile("es")
    [proposal] = logged("es")
    assert (proposal.task_index, proposal.action, proposal.mode, proposal.status) == (
        TRAILING, "stop", "shadow", "proposed")
    assert scancels(fake_slurm) == []
    finish_the_others(fake_slurm)
    assert reconcile("es").campaigns[0].state == "finished"


def test_a_stop_waiting_for_approval_leaves_the_attempt_to_the_other_rules(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm)
    spec = (tmp_path / "es.yaml").read_text() + "  approval: {always: [early_stopping]}\n"
    submit(write_spec(tmp_path, spec, "es.yaml"))  # a new revision: stops now need a human
    reconcile("es")
    [waiting] = pending_approvals("es")
    assert (waiting.task_index, waiting.action, waiting.gate) == (
        TRAILING, "stop", "the early_stopping rule always needs approval")
    assert scancels(fake_slurm) == []
    array = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(array, TRAILING, "FAILED", "1:0", "node1")  # it fails before anyone answers
    reconcile("es")
    assert [(e.action, e.rule) for e in logged("es")][-1] == ("give_up", "failed")  # not answered by the waiting stop


def test_a_candidate_policy_proposes_the_stop_and_once_promoted_it_acts(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, fake_slurm, ", rule: none")  # the enforced policy does not stop
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text("name: stopper\nversion: 1\nearly_stopping: {metric: val_loss, grace_steps: 3}\n")
    set_policy("es", candidate, shadow=True)
    reconcile("es")
    reconcile("es")
    assert [(e.policy, e.action, e.mode, e.task_index) for e in logged("es")] == [
        ("stopper@v1", "stop", "shadow", TRAILING)]
    assert scancels(fake_slurm) == []
    promote("es")
    reconcile("es")  # the proposal answered nothing: the promoted rule acts on the same attempt
    assert [(e.action, e.mode, e.status) for e in logged("es")][-1] == ("stop", "enforce", "applied")
    assert len(scancels(fake_slurm)) == 1
