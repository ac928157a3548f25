"""Governance on the real cluster: a bad policy set mid-flight resizes pending jobs, `rollback`
gives them their resources back, and rolling back the rollback works too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import DecisionLog, LoggedDecision
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from tests.integration.test_real_cluster import cli, own_jobs_named
from tests.integration.test_reconcile_real import chaos_campaign, latest, wait_for

pytestmark = pytest.mark.slurm

BAD_POLICY = """\
name: grow-fast
version: 1
description: grows memory 8x on OOM and pushes it onto every pending sibling (a bad idea)
max_failures: 6
rules:
  out_of_memory: {action: resubmit, max_retries: 3, mem_factor: 8, resize_pending: true}
"""


def log_of(name: str) -> list[LoggedDecision]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return DecisionLog(store.engine).entries(record.id)


def pending_memory(array: str) -> dict[int, str]:
    """Array index → memory of each element still PENDING, as the controller holds it (squeue -r
    lists every element; scontrol folds the untouched pending ones into one `2-3` record)."""
    out = proc.run(["squeue", "-r", "-h", f"-j{array}", "-o", "%i %T %m"]).stdout
    return {int(job.split("_")[1]): memory for job, state, memory in (line.split() for line in out.splitlines())
            if state == "PENDING"}


def assert_pending_at(array: str, memory: str, among: list[int]) -> list[int]:
    """Every element still pending (a sibling may start meanwhile: it is then left alone) has `memory`."""
    now = pending_memory(array)
    assert now and set(now) <= set(among) and set(now.values()) == {memory}, now
    return sorted(now)


def scontrol_memory(job: str) -> str:
    """MinMemoryNode of one element (sacct folds never-started elements into one `N_[2-3]` line)."""
    out = proc.run(["scontrol", "-o", "show", "job", job]).stdout
    return out.split("MinMemoryNode=")[1].split()[0]


def test_rollback_restores_what_a_bad_policy_did_to_pending_jobs(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    # max_parallel 1: task 0 runs 20 s then OOMs; tasks 1-3 (slow) wait in the same array.
    name = chaos_campaign(tmp_path, "govern", ["late_oom", "slow", "slow", "slow"],
                          "array: {max_parallel: 1}\n")
    spec = (tmp_path / "govern.yaml").read_text().replace("policy: {use: default, rules:",
                                                           "policy: {use: default, known_good_after: 1s, rules:")
    (tmp_path / "govern.yaml").write_text(spec)
    assert cli("submit", str(tmp_path / "govern.yaml"), "--reason", "known_good_after 1s").returncode == 0
    array = (latest(name)[1].job_id or "").split("_")[0]
    try:
        # revision 2 (the spec above) runs without a failure it caused: known-good on its own
        def known_good() -> bool:
            reconcile(name)
            return any(e.action == "mark_known_good" for e in log_of(name))
        wait_for("revision 2 to be marked known-good", known_good, 60)
        assert [e.params["revision"] for e in log_of(name) if e.action == "mark_known_good"] == [2]

        (tmp_path / "bad.yaml").write_text(BAD_POLICY)
        changed = cli("policy", "set", name, str(tmp_path / "bad.yaml"), "--reason", "grow memory faster")
        assert changed.returncode == 0, changed.stderr
        assert "revision 3 is current" in changed.stdout and '→ "grow-fast"' in changed.stdout  # the settings

        def bad_resize_seen() -> bool:
            reconcile(name)
            return any(e.action == "resize_pending" and e.status == "applied" for e in log_of(name))
        wait_for("the OOM and the bad policy's resize of pending siblings", bad_resize_seen, 120)
        bad = [e for e in log_of(name) if e.action == "resize_pending"]
        assert {e.revision for e in bad} == {3} and {e.policy for e in bad} == {"grow-fast@v1"}
        # task 1 takes the slot task 0 left; then 2 and 3 wait behind it for the rest of the test
        # started as squeue sees it and as the tick does: sacct lags squeue by seconds under load, and
        # a tick that still read task 1 PENDING had the rollback plan resize it (seen once in CI)
        def task_1_started() -> bool:
            reconcile(name)
            return 1 not in pending_memory(array) and latest(name)[1].state != "PENDING"
        wait_for("task 1 to start", task_1_started, 60)
        before = pending_memory(array)
        assert before and set(before.values()) == {"2000M"}, before  # 250M x 8 on every pending sibling
        resized = sorted(before)

        planned = cli("rollback", name, "--dry-run", "--json")
        assert planned.returncode == 0, planned.stderr
        plan = json.loads(planned.stdout)["data"]
        assert plan["target"] == 2 and plan["new_revision"] is None
        # task 0's retry (its own array) may be planned too, with revision 2's 1.5x answer
        assert sorted(s["task"] for s in plan["steps"] if s["action"] == "resize_pending" and s["task"]) == resized
        assert pending_memory(array) == before  # a dry run changes nothing

        done = cli("rollback", name, "--reason", "8x memory starves the queue", "--json")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)["data"]
        assert result["target"] == 2 and result["new_revision"] == 4
        # (task 0's retry, if planned, may have run and ended meanwhile: its step then fails as "not queued")
        assert {s["status"] for s in result["steps"] if s["task"] in resized} == {"applied"}
        still = assert_pending_at(array, "250M", resized)
        assert {scontrol_memory(f"{array}_{i}") for i in still} == {"250M"}

        steps = [e for e in log_of(name) if e.rule == "rollback"]
        assert steps[0].action == "make_current" and steps[0].params == {"revision": 4, "target_revision": 2}
        undo = [e for e in steps if e.action == "resize_pending" and e.task_index]
        assert sorted(e.task_index for e in undo) == resized and {e.status for e in undo} == {"applied"}
        assert {e.revision for e in undo} == {4}
        assert set(undo[0].inputs["undoes"]) <= {e.id for e in bad}  # type: ignore[arg-type]

        # rolling back the rollback puts the bad policy's sizes back; a default rollback undoes it again
        again = cli("rollback", name, "--to", "3", "--reason", "on second thought")
        assert again.returncode == 0, again.stderr
        assert_pending_at(array, "2000M", resized)
        final = cli("rollback", name, "--json")
        assert final.returncode == 0, final.stderr
        assert json.loads(final.stdout)["data"]["target"] == 2
        assert_pending_at(array, "250M", resized)

        listing = cli("revisions", name, "--json")
        revisions = json.loads(listing.stdout)["data"]["revisions"]
        assert [(r["number"], r["kind"], r["source_revision"]) for r in revisions] == [
            (1, "spec", None), (2, "spec", None), (3, "policy", None), (4, "rollback", 2),
            (5, "rollback", 3), (6, "rollback", 2)]
        assert [r["reason"] for r in revisions][1:4] == ["known_good_after 1s", "grow memory faster",
                                                          "8x memory starves the queue"]
        assert revisions[1]["known_good"] and not revisions[2]["known_good"]
        assert revisions[3]["content_hash"] == revisions[1]["content_hash"] == revisions[5]["content_hash"]
    finally:
        for row in latest(name).values():
            if row.job_id:
                proc.run(["scancel", row.job_id.split("_")[0]], check=False)
        # scancel returns before the jobs are gone: leave the nodes free for the next test
        wait_for("the campaign's jobs to leave the queue", lambda: not own_jobs_named(name), 60)
