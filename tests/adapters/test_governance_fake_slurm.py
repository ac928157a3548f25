"""Shadow mode, candidate policies, approvals and known-good revisions against the fake Slurm:
what reaches Slurm (counted at the subprocess boundary) and what the log shows."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from campaignctl.adapters.governance_facts import revision_run
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import ConflictError
from campaignctl.core.governance.governance import known_good_verdict
from campaignctl.services.approvals import approve, pending_approvals, reject
from campaignctl.services.reconcile import reconcile
from campaignctl.services.revisions import list_revisions, promote, set_policy
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.fakeslurm import FakeSlurm

OOM = ("OUT_OF_MEMORY", "0:125", "node1")


def campaign(tmp_path: Path, policy: str, tasks: int = 4, name: str = "gov") -> str:
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, "{{i}}"]
matrix: {{i: [{", ".join(str(i) for i in range(tasks))}]}}
resources: {{mem: 1G, time: "00:10:00"}}
policy: {policy}
""", name=f"{name}.yaml"))
    return name


def mutations(fake: FakeSlurm) -> Counter[str]:
    """Every call that can change something: sbatch (not `--test-only`), scancel, and scontrol
    other than `show`."""
    return Counter(argv[0] for argv in fake.argvs
                   if (argv[0] == "sbatch" and argv[1] != "--test-only") or argv[0] == "scancel"
                   or (argv[0] == "scontrol" and argv[1] != "show"))


def oom_then_pending_sibling(fake: FakeSlurm) -> str:
    first = min(fake.jobs, key=int)
    fake.set_state(first, 0, *OOM)
    fake.set_state(first, 1, "PENDING", "0:0", "")
    return first


def test_a_shadow_rule_proposes_with_its_inputs_and_never_touches_slurm(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, "{use: default, rules: {out_of_memory: {mode: shadow}}}")
    oom_then_pending_sibling(fake_slurm)
    fake_slurm.argvs.clear()
    for _ in range(3):
        reconcile(name)
    assert mutations(fake_slurm) == Counter()  # no sbatch, no scontrol update, no scancel
    proposed = [e for e in logged(name) if e.mode == "shadow"]
    # once per attempt, not once per tick: the OOM retry and the resize of its pending sibling
    assert sorted((e.task_index, e.action) for e in proposed) == [(0, "resubmit"), (1, "resize_pending")]
    assert {e.status for e in proposed} == {"proposed"}
    retry = next(e for e in proposed if e.action == "resubmit")
    assert retry.inputs["slurm_state"] == "OUT_OF_MEMORY" and retry.params["changes"] == {"mem_mb": [1024, 1536]}
    assert all(e.mode == "enforce" for e in logged(name) if e not in proposed)
    summary = status(name).campaigns[0].summary  # shown apart from what was done
    assert "decisions: 1 start; shadow proposals: 1 resize pending, 1 resubmit" in summary


def test_promoting_the_shadow_rule_lets_its_decision_act(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, "{use: default, rules: {out_of_memory: {mode: shadow}}}")
    oom_then_pending_sibling(fake_slurm)
    reconcile(name)
    result = promote(name, reason="proposals looked right")
    current = next(r for r in result.revisions if r.current)
    assert (current.number, current.kind, current.shadow_rules) == (2, "promote", [])
    fake_slurm.argvs.clear()
    reconcile(name)
    assert mutations(fake_slurm)["sbatch"] == 1
    acted = [e for e in logged(name) if e.mode == "enforce" and e.action == "resubmit"]
    assert [(e.task_index, e.status, e.revision) for e in acted] == [(0, "applied", 2)]
    with pytest.raises(ConflictError, match="nothing runs in shadow"):
        promote(name)


def test_a_whole_policy_in_shadow_proposes_every_rule_and_acts_on_none(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, "{use: default, mode: shadow}")
    first = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(first, 0, *OOM)
    fake_slurm.set_state(first, 2, "TIMEOUT", "0:0", "node2")
    fake_slurm.argvs.clear()
    reconcile(name)
    assert mutations(fake_slurm) == Counter()
    assert sorted((e.rule, e.status) for e in logged(name)) == [("out_of_memory", "proposed"),
                                                                 ("timeout", "proposed")]


def test_a_candidate_policy_proposes_next_to_the_enforced_one(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, "default")
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text("name: frugal\nversion: 2\nmax_failures: 3\n"
                         "rules: {out_of_memory: {action: resubmit, max_retries: 1, mem_factor: 2}}\n")
    set_policy(name, candidate, shadow=True)
    first = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(first, 0, *OOM)
    fake_slurm.argvs.clear()
    reconcile(name)
    reconcile(name)
    assert mutations(fake_slurm)["sbatch"] == 1  # only the enforced policy's retry
    log = logged(name)
    enforced = [(e.policy, e.params.get("changes")) for e in log if e.mode == "enforce" and e.action == "resubmit"]
    shadow = [(e.policy, e.params.get("changes"), e.status) for e in log if e.mode == "shadow"]
    assert enforced == [("default@v1", {"mem_mb": [1024, 1536]})]
    assert shadow == [("frugal@v2", {"mem_mb": [1024, 2048]}, "proposed")]
    promoted = promote(name)
    assert next(r for r in promoted.revisions if r.current).policy == "frugal@v2 (extends default@v1)"


APPROVAL = "{use: default, approval: {max_mem: 1200M, expire_after: 1h}}"


def test_a_decision_above_the_approval_limit_waits_then_acts_when_approved(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, APPROVAL)
    first = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(first, 0, *OOM)
    fake_slurm.argvs.clear()
    reconcile(name)
    reconcile(name)
    assert mutations(fake_slurm) == Counter()
    waiting = pending_approvals(name)
    assert [(w.task_index, w.action, w.status) for w in waiting] == [(0, "resubmit", "awaiting-approval")]
    assert "1536 MB of memory is above approval limit 1200" in waiting[0].gate
    result = approve(waiting[0].id, reason="checked")
    assert result.status == "applied" and result.job_id
    assert mutations(fake_slurm)["sbatch"] == 1
    log = logged(name)
    assert next(e for e in log if e.id == waiting[0].id).status == "applied"
    verdict = next(e for e in log if e.action == "approve")
    assert verdict.params["decision_id"] == waiting[0].id and "approved by" in verdict.reason
    assert pending_approvals(name) == []
    with pytest.raises(ConflictError, match="not awaiting approval"):
        approve(waiting[0].id)


def test_a_campaign_whose_retry_waits_for_approval_is_not_finished(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    """Every other task done and the last one's retry awaiting approval: the campaign still has
    work, so it stays active (a `finish` notification then would be wrong) until it is answered."""
    name = campaign(tmp_path, APPROVAL, tasks=2)
    first = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(first, 0, *OOM)
    fake_slurm.set_state(first, 1, "COMPLETED", "0:0", "node2")
    reconcile(name)
    reconcile(name)
    record = Store.open().campaign(name)
    assert record is not None and record.state == "active"
    assert [w.task_index for w in pending_approvals(name)] == [0]


def test_a_rejected_decision_is_never_carried_out(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, APPROVAL, tasks=1)
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 0, *OOM)
    reconcile(name)
    decision = pending_approvals(name)[0]
    fake_slurm.argvs.clear()
    assert reject(decision.id, reason="too big").status == "rejected"
    reconcile(name)
    assert mutations(fake_slurm) == Counter()
    assert next(e for e in logged(name) if e.id == decision.id).status == "rejected"
    store = Store.open()
    record = store.campaign(name)
    assert record is not None and record.state == "finished"  # the task stops there


def test_a_decision_nobody_answers_expires(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, "{use: default, approval: {max_mem: 1200M, expire_after: 0s}}", tasks=1)
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 0, *OOM)
    reconcile(name)
    assert [e.status for e in logged(name) if e.action == "resubmit"] == ["expired"]
    assert pending_approvals(name) == []


def test_too_many_tasks_at_once_waits_for_approval(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, "{use: default, approval: {max_tasks: 2}}", tasks=4)
    first = min(fake_slurm.jobs, key=int)
    for index in range(3):
        fake_slurm.set_state(first, index, *OOM)
    reconcile(name)
    waiting = pending_approvals(name)
    assert len(waiting) == 3 and all("on 3 tasks at once" in w.gate for w in waiting)


def test_a_revision_is_known_good_once_its_work_ran_without_policy_failures(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, "{use: default, known_good_after: 0s}", tasks=2)
    first = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(first, 0, "RUNNING", "0:0", "node1")
    fake_slurm.set_state(first, 1, "PENDING", "0:0", "")
    reconcile(name)
    rows = list_revisions(name).revisions
    assert rows[0].known_good.startswith("revision 1 ran")


def test_a_retry_that_fails_again_keeps_its_revision_from_known_good(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    name = campaign(tmp_path, "{use: default, known_good_after: 1h}", tasks=1)
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 0, *OOM)
    reconcile(name)  # the retry, made by revision 1's policy
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    retry = max(fake_slurm.jobs, key=int)
    fake_slurm.set_state(retry, 0, *OOM)
    reconcile(name)
    run = revision_run(store.engine, store.revision(record.id, 1))
    assert any("ended OUT_OF_MEMORY" in f for f in run.policy_failures), run
    assert known_good_verdict(run, datetime.now(timezone.utc), 0) == ""
