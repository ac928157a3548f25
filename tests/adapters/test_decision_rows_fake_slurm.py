"""Pending tasks one OOM raises alike are one row of the decision log, and still each task's
decision to status, `log --task`, `policy replay` and rollback (against the fake Slurm)."""

from __future__ import annotations

from pathlib import Path

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.log import decision_log
from campaignctl.services.reconcile import reconcile
from campaignctl.services.replay import replay_policy
from campaignctl.services.revisions import set_policy
from campaignctl.services.rollback import rollback
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


def test_one_row_for_the_siblings_one_oom_raised_and_each_task_still_sees_its_decision(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, """\
name: rows
command: [python3, train.py, "{i}"]
matrix: {i: [0, 1, 2, 3, 4]}
resources: {mem: 1G, time: "00:10:00"}
policy: {use: default, rules: {out_of_memory: {resize_pending: false}}}
""", name="rows.yaml"))
    set_policy("rows", "default", reason="raise pending siblings")
    array = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(array, 0, "OUT_OF_MEMORY", "0:125", "node1")
    for i in (1, 2, 3):
        fake_slurm.set_state(array, i, "PENDING", "0:0", "")
    reconcile("rows")

    updates = [argv for argv in fake_slurm.argvs if argv[:2] == ("scontrol", "update")]
    assert updates == [("scontrol", "update", f"JobId={array}_[1,2,3]", "MinMemoryNode=1536")]
    [row] = [e for e in decision_log("rows") if e.action == "resize_pending"]  # as `log` prints it
    assert [m[0] for m in row.params["members"]] == [1, 2, 3] and row.status == "applied"
    store = Store.open()
    record = store.campaign("rows")
    assert record is not None
    each = [e for e in DecisionLog(store.engine).entries(record.id) if e.action == "resize_pending"]
    assert [(e.task_index, e.inputs["job_id"], e.id) for e in each] == [
        (1, f"{array}_1", row.id), (2, f"{array}_2", row.id), (3, f"{array}_3", row.id)]
    assert [e.id for e in decision_log("rows", task=2)][-1] == row.id
    rows = {r.index: r for r in status("rows").tasks}
    assert all("resize_pending" in rows[i].last_decision for i in (1, 2, 3))

    replayed = replay_policy("default", "rows")
    assert replayed.identical and replayed.reproduced == replayed.replayed_decisions == 5  # with the start
    undo = rollback("rows", to=1, dry_run=True)
    assert sorted(s.task for s in undo.steps if s.action == "resize_pending") == [1, 2, 3]
