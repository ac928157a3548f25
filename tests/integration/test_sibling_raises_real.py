"""How far a failure's evidence reaches pending work on the real cluster (core/tick/siblings.py): a
memory raise that would fit fewer tasks per node is not made, and a node the campaign excludes
joins every pending task's ExcNodeList. The nodes are read from the real sinfo: the lab's hold
2 CPUs, 4000 MB and 2 GPUs each (scripts/slurmlab)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.integration.test_reconcile_real import HERE, latest, wait_for

pytestmark = pytest.mark.slurm


def campaign(tmp_path: Path, name: str, modes: list[tuple[str, int]], resources: str, extra: str = "") -> str:
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    tasks = "\n".join(f"  - {{mode: {m}, mb: {mb}}}" for m, mb in modes)
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, chaos.py, "{{mode}}", "{{mb}}"]
tasks:
{tasks}
resources: {resources}
policy: default
{extra}""", name=f"{name}.yaml"))
    return name


def queued(array: str, fields: str) -> dict[str, str]:
    out = proc.run(["squeue", "-r", "-h", f"-j{array}", "-o", f"%i|{fields}"]).stdout
    return {line.split("|", 1)[0]: line.split("|", 1)[1] for line in out.splitlines() if line.strip()}


def cancel_all(name: str) -> None:
    for row in latest(name).values():
        if row.job_id:
            proc.run(["scancel", row.job_id.split("_")[0]], check=False)


def test_a_memory_raise_that_fits_fewer_tasks_per_node_is_not_made(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    # 1 CPU and 2000M each: a lab node holds 2; at 3000M it would hold 1. One task runs at a time.
    name = campaign(tmp_path, "nosqueeze", [("oom", 2600), ("slow", 0), ("slow", 0), ("slow", 0)],
                    '{cpus_per_task: 1, mem: 2000M, time: "00:10:00"}', "array: {max_parallel: 1}")
    try:
        array = (latest(name)[0].job_id or "").split("_")[0]
        wait_for("the OOM's retry", lambda: any(d.rule == "out_of_memory" for c in reconcile(name).campaigns
                                                  for d in c.decisions))
        [retry] = [e for e in logged(name) if e.rule == "out_of_memory"]
        assert retry.action == "resubmit" and retry.params["changes"]["mem_mb"] == [2000, 3000]  # type: ignore[index]
        assert [2, 4000, 2] in retry.inputs["node_shapes"]  # type: ignore[operator]  # read from sinfo
        assert str(retry.inputs["siblings"]).startswith("not raised: 3000M fits fewer tasks per node")
        assert not [e for e in logged(name) if e.action == "resize_pending"]
        pending = {k: v for k, v in queued(array, "%T|%m").items() if v.startswith("PENDING")}
        assert pending and set(pending.values()) == {"PENDING|2000M"}  # left as asked
    finally:
        cancel_all(name)


def test_a_node_the_campaign_excludes_joins_every_pending_tasks_exclude(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    # 1 CPU each: 8 run (2 per node), 4 wait; DOWN one node ends its 2 tasks NODE_FAIL at once,
    # and 2 node failures exclude a node for the campaign (campaign_exclude_after: 2)
    name = campaign(tmp_path, "exclpush", [("slow", 0)] * 12, '{cpus_per_task: 1, mem: 200M, time: "00:10:00"}')
    array = (latest(name)[0].job_id or "").split("_")[0]
    try:
        wait_for("8 tasks to run", lambda: sum(v == "RUNNING" for v in queued(array, "%T").values()) == 8)
        nodes = [n for v in queued(array, "%T|%N").values() if v.startswith("RUNNING") for n in split_nodes(v[8:])]
        down = max(set(nodes), key=nodes.count)
        try:  # the lab's fastest NODE_FAIL (slurm-lab NOTES.md): DOWN ends the jobs within a second
            proc.run(["scontrol", "update", f"NodeName={down}", "State=DOWN", "Reason=exclude-test"])
            wait_for("the exclusion pushed", lambda: any(d.action == "resize_pending" for c in reconcile(name).campaigns
                                                         for d in c.decisions))
        finally:
            proc.run(["scontrol", "update", f"NodeName={down}", "State=RESUME"], check=False)
        pushed = [e for e in logged(name) if e.action == "resize_pending"]
        assert {e.rule for e in pushed} == {"node_fail"} and {e.status for e in pushed} == {"applied"}
        assert len({e.id for e in pushed}) == 1  # one row of the log for the pending tasks alike
        excluded = {k: v for k, v in queued(array, "%T|%x").items() if v.startswith("PENDING")}
        assert excluded and all(down in split_nodes(v.split("|")[1]) for v in excluded.values()), excluded
    finally:
        cancel_all(name)
