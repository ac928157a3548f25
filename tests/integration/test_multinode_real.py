"""Multi-node attempts on the real cluster: a real torch.distributed (Gloo, CPU) all-reduce over
2 nodes × 2 processes, with each launcher. The lab's nodes have 2 CPUs each, so one such attempt
holds two whole nodes and may queue behind other tests' jobs: the waits are long."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.model.attempt_paths import task_dir
from campaignctl.core.model.records import HistoryRow
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import REPO, write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import history, latest, ticking_until_finished, wait_for
from tests.lab_nodes import all_nodes

pytestmark = pytest.mark.slurm
PROGRAM = REPO / "tests" / "programs" / "allreduce.py"


@pytest.fixture
def torch_python() -> str:
    """The Python that has torch (the test extra installs the CPU build). In CI a missing torch
    fails the test, it never skips."""
    if importlib.util.find_spec("torch") is None:
        message = "the multi-node tests need torch: `pip install torch==2.13.0` (scripts/setup does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return sys.executable


def allreduce_campaign(tmp_path: Path, name: str, python: str, launcher: str, hold_s: int = 0,
                       tasks: int = 1, extra: str = "", hang: str = "", loop_s: int = 0) -> str:
    bindir = Path(python).parent  # torchrun lives beside the Python that has torch
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [{python}, {PROGRAM}, "4", "2", "{hold_s}"{hang}]
tasks: [{", ".join(f"{{n: {i}}}" for i in range(tasks))}]
env: {{PATH: "{bindir}:/usr/bin:/bin", ALLREDUCE_LOOP_S: "{loop_s}"}}
resources: {{nodes: 2, tasks_per_node: 2, launcher: {launcher}, cpus_per_task: 1, mem: 1500M, time: "00:10:00"}}
{extra}""", name=f"{name}.yaml"))
    return name


def rank_lines(attempt: Path) -> dict[int, str]:
    """Each rank's output, from rank 0's output.log and output.rank<r>.log (or torchrun's
    prefixed lines), keyed by the rank the program printed. Two processes of one node share a
    log, and an unbuffered print writes its text and its newline apart, so lines interleave
    (seen in CI: `… nodes ['node1', 'node2']rank 2 all_reduce …`): each report ends at its `]`."""
    text = "".join(p.read_text() for p in sorted(attempt.glob("output*.log")))
    return {int(m[1]): m[0] for m in re.finditer(r"rank (\d) all_reduce sum [^\]]*\]", text)}


def check_allreduce(run_dir: Path, name: str) -> Path:
    rows = history(name)
    assert [r.state for r in rows] == ["COMPLETED"], rows
    attempt = task_dir(str(run_dir), 0) / rows[0].token
    check_allreduce_lines(attempt)
    return attempt


def check_allreduce_lines(attempt: Path) -> None:
    lines = rank_lines(attempt)
    assert sorted(lines) == [0, 1, 2, 3], (attempt / "output.log").read_text()
    assert all("sum 10 (expected 10)" in line and "nodes ['" in line for line in lines.values()), lines
    nodes = {n for n in all_nodes() if f"'{n}'" in " ".join(lines.values())}
    assert len(nodes) == 2, lines
    assert json.loads((attempt / "exit.json").read_text())["returncode"] == 0


def test_two_nodes_two_processes_each_all_reduce_with_srun(
        slurm_conf: str, state_home: Path, tmp_path: Path, torch_python: str) -> None:
    """…and then all-reduce 32 MiB again and again for 8 s: communication-bound, from the bytes
    through the first node's network. The lab's nodes share the host's network namespace and talk
    through its loopback, so the spec names `lo` (a site names ib0 or its HCA, or leaves the
    default: every device-backed interface and InfiniBand port)."""
    name = allreduce_campaign(tmp_path, "mn-srun-multinode", torch_python, "srun", loop_s=8,
                              extra="telemetry: {interval: 1s, interfaces: [lo]}\n")
    ticking_until_finished(name, timeout_s=900)
    attempt = check_allreduce(tmp_path / "runs" / name, name)
    [row] = status(name).tasks
    held = row.efficiency
    assert held is not None and held.bottleneck == "communication", held
    assert "MB/s through its node's network while" in held.bottleneck_why, held.bottleneck_why
    samples = [json.loads(line) for line in (attempt / "telemetry.node1.jsonl").read_text().splitlines()]
    assert max(s.get("node_net_rx_mb", 0) for s in samples) > 100, samples  # node 1's sampler counts too
    ranks = {json.loads(p.read_text())["node"] for p in attempt.glob("exit*.json")}
    assert len(ranks) == 2 and len(list(attempt.glob("exit*.json"))) == 4  # one exit file per rank
    assert (attempt / "telemetry.node1.jsonl").exists()  # node rank 1
    assert cli("report", name, "--out", str(tmp_path / "report")).returncode == 0
    page = (tmp_path / "report" / "index.html").read_text()
    nodes_table = page[page.index("Nodes of multi-node attempts"):]
    assert all(f"<td>{node}</td>" in nodes_table for node in ranks), nodes_table[:2000]  # one line per node
    assert "network MB/s (mean)" in nodes_table, nodes_table[:2000]


def test_two_nodes_two_processes_each_all_reduce_with_torchrun(
        slurm_conf: str, state_home: Path, tmp_path: Path, torch_python: str) -> None:
    name = allreduce_campaign(tmp_path, "mn-torchrun-multinode", torch_python, "torchrun")
    ticking_until_finished(name, timeout_s=900)
    attempt = check_allreduce(tmp_path / "runs" / name, name)
    assert len(list(attempt.glob("exit*.json"))) == 2  # one torchrun per node, each forking 2 processes


def test_a_node_set_down_mid_run_fails_the_attempt_and_the_retry_avoids_only_that_node(
        slurm_conf: str, state_home: Path, tmp_path: Path, torch_python: str) -> None:
    # the first attempts hold 30 s after joining the group (time to set a node DOWN), the retry none
    name = allreduce_campaign(tmp_path, "mn-nodefail-multinode", torch_python, "srun", hold_s=30, tasks=2)
    run_dir = tmp_path / "runs" / name
    first = wait_running(name, run_dir, task=0)
    nodes = proc.run(["squeue", "-h", "-j", first.job_id or "", "-o", "%N"]).stdout.strip()
    down = split_nodes(nodes)[-1]
    try:  # the lab's fastest NODE_FAIL (slurm-lab NOTES.md): DOWN ends the job within a second
        proc.run(["scontrol", "update", f"NodeName={down}", "State=DOWN", "Reason=multinode-test"])
        wait_for(f"{first.job_id} to end NODE_FAIL", lambda: job_state(first.job_id or "") == "NODE_FAIL")
    finally:
        # RESUME is refused once the node re-registered idle by itself ("Invalid node state specified")
        proc.run(["scontrol", "update", f"NodeName={down}", "State=RESUME"], check=False)
    ticking_until_finished(name, timeout_s=1200)
    rows = [r for r in history(name) if r.task_index == 0]
    assert [r.state for r in rows] == ["NODE_FAIL", "COMPLETED"], rows
    assert rows[0].evidence.startswith(f"{down}|") and "DOWN|multinode-test" in rows[0].evidence
    assert json.loads(rows[1].resources_json)["exclude"] == down  # the healthy node of the pair stays usable
    assert down not in split_nodes(rows[1].nodes) and len(split_nodes(rows[1].nodes)) == 2
    assert {r.state for r in history(name) if r.task_index == 1} == {"COMPLETED"}
    check_allreduce_lines(task_dir(str(run_dir), 0) / rows[1].token)
    assert f"node fail of {down} (of {rows[0].nodes}: {down} DOWN at " in cli("log", name).stdout
    shown = cli("status", name)  # what a user reads: the node pair each task ran on
    assert shown.returncode == 0 and "nodes" in shown.stdout and rows[1].nodes in shown.stdout, shown.stdout
    assert cli("report", name, "--out", str(tmp_path / "report")).returncode == 0
    assert f"<td>{rows[1].nodes}</td>" in (tmp_path / "report" / "index.html").read_text()


def job_state(job_id: str) -> str:
    """sacct's State, '' while sacct lags behind the change (seen for ~1 s after the DOWN)."""
    out = proc.run(["sacct", "-X", "-n", "-P", f"-j{job_id}", "--format=State"]).stdout.split()
    return out[0] if out else ""


def wait_running(name: str, run_dir: Path, task: int) -> HistoryRow:
    """The task's attempt once its program runs on every rank (reconcile ticking meanwhile)."""
    def started() -> bool:
        reconcile(name)
        row = latest(name).get(task)
        return row is not None and len(list((task_dir(str(run_dir), task) / row.token).glob("started*.json"))) == 4
    wait_for(f"task {task} of {name} to start", started, timeout_s=900)
    return latest(name)[task]


def test_a_collective_timeout_is_retried_without_the_node_whose_ranks_never_reported(
        slurm_conf: str, state_home: Path, tmp_path: Path, torch_python: str) -> None:
    # attempt 1: node rank 1's processes stall 45 s; ranks 0-1 time out in Gloo's all-reduce after 15 s
    name = allreduce_campaign(tmp_path, "mn-collective-multinode", torch_python, "srun", hang=', "1", "15"')
    ticking_until_finished(name, timeout_s=1200)
    rows = history(name)
    assert [r.state for r in rows] == ["FAILED", "COMPLETED"], rows
    first, retry = rows
    assert first.cause == "collective_timeout", (first.cause, first.evidence)
    assert "Timed out waiting 15000ms for recv operation" in first.evidence
    reporting = set(re.findall(r"\[rank [01] on ([a-z]+\d+)\]", first.evidence))
    stalled = [n for n in split_nodes(first.nodes) if n not in reporting]
    assert len(reporting) == 1 and len(stalled) == 1, first.evidence
    assert json.loads(retry.resources_json)["exclude"] == stalled[0]
    assert stalled[0] not in split_nodes(retry.nodes)
    check_allreduce_lines(task_dir(str(tmp_path / "runs" / name), 0) / retry.token)
