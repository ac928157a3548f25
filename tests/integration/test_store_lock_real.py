"""A reconcile tick of a real campaign while another process holds the database's write lock:
exit 75 with a hint after the busy timeout, nothing decided and nothing submitted; the next tick,
once the lock is gone, answers the failure exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from tests.adapters.test_store_faults import database, write_locked
from tests.conftest import policy_decisions
from tests.integration.test_real_cluster import cli, own_jobs_named
from tests.integration.test_reconcile_real import chaos_campaign, latest, wait_for

pytestmark = pytest.mark.slurm


def state_of(job_id: str) -> str:
    """The job's state in sacct ('' until sacct knows it: it lags squeue)."""
    out = proc.run(["sacct", "-X", "-n", "-P", f"-j{job_id}", "--format=State"]).stdout.split()
    return out[0] if out else ""


@pytest.mark.sqlite_only(reason="the sqlite3 tool holds the file's write lock")
def test_a_tick_under_a_write_lock_exits_75_changes_nothing_and_the_next_tick_converges(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    name = chaos_campaign(tmp_path, "locked", ["oom", "ok"])
    first = latest(name)[0].job_id
    assert first
    # sacct shows the job FAILED 1:0 with its step OUT_OF_MEMORY 0:125 (lab cluster, Slurm 22.05)
    wait_for("the OOM attempt to end in sacct", lambda: state_of(first) in ("FAILED", "OUT_OF_MEMORY"), timeout_s=300)
    jobs_before = own_jobs_named(name)

    with write_locked(database(state_home)):
        done = cli("reconcile", name)
    assert done.returncode == 75, done.stderr
    assert "locked" in done.stderr and "hint: " in done.stderr and "changed nothing" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert policy_decisions(DecisionLog(Store.open().engine).entries()) == []
    assert own_jobs_named(name) == jobs_before  # no retry went to Slurm

    done = cli("reconcile", name)
    assert done.returncode == 0, done.stderr
    decisions = policy_decisions(DecisionLog(Store.open().engine).entries())
    assert [(d.task_index, d.rule, d.action, d.status) for d in decisions] == [
        (0, "out_of_memory", "resubmit", "applied")]
    assert len([r for r in Store.open().history(Store.open().campaign(name).id)  # type: ignore[union-attr]
                if r.task_index == 0]) == 2  # the one retry, not two
