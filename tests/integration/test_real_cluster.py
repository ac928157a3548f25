"""Against the real local Slurm cluster (scripts/slurmlab up). CI always runs these."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.services.status import StatusResult, status
from campaignctl.services.submit import submit
from tests.conftest import REPO, write_spec
from tests.lab_nodes import nodes_with

pytestmark = pytest.mark.slurm
TERMINAL = {"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "CANCELLED", "PREEMPTED"}


def wait_until_terminal(campaign: str, timeout_s: float = 180) -> StatusResult:
    deadline = time.monotonic() + timeout_s
    while True:
        result = status(campaign)
        if all(row.state in TERMINAL for row in result.tasks):
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{campaign} not finished after {timeout_s}s: {result.campaigns[0].counts}")
        time.sleep(2)


def cli(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "campaignctl", *args], capture_output=True, text=True,
                          env=env, timeout=180, cwd=REPO)


def own_jobs_named(fragment: str) -> list[str]:
    out = proc.run(["squeue", "--me", "--noheader", "--format=%F|%j"]).stdout
    return [line for line in out.splitlines() if fragment in line]


def attempt_files(run_dir: Path, name: str) -> dict[int, dict]:
    return {int(p.parent.parent.name): json.loads(p.read_text())
            for p in run_dir.glob(f"tasks/*/*/{name}")}


def test_demo_campaign_runs_as_one_array_and_reconcile_brings_it_to_completed(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    for name in ("demo.yaml", "toy_train.py"):
        shutil.copy(REPO / "templates" / name, tmp_path / name)
    done = cli("submit", str(tmp_path / "demo.yaml"), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["data"]
    assert data["sbatch_calls"] == 1 and data["chunks"][0]["array_spec"] == "0-7%8"
    deadline = time.monotonic() + 180
    while json.loads(cli("reconcile", "demo", "--json").stdout)["data"]["campaigns"][0]["state"] != "finished":
        assert time.monotonic() < deadline, "demo not finished under reconcile after 180 s"
        time.sleep(2)
    result = status("demo")
    assert [r.state for r in result.tasks] == ["COMPLETED"] * 8
    # the depth-8 tasks ran out of memory at 200M and were resubmitted, once each
    assert {r.index: r.attempts for r in result.tasks} == {i: 1 if i % 2 == 0 else 2 for i in range(8)}
    shown = cli("status", "demo")
    assert shown.returncode == 0
    assert "8 tasks (COMPLETED 8); 12 attempts; decisions: 4 resubmit, 1 start" in shown.stdout
    log = next((tmp_path / "runs" / "demo" / "tasks" / "0").glob("*/output.log")).read_text()
    assert "step 4 loss" in log


def test_typed_gpus_and_cpu_mask_match_the_request(slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, """\
name: bind
command: [python3, -c, "import time; time.sleep(1)", "{i}"]
matrix: {i: [0, 1, 2]}
resources: {gpus: 1, gpu_type: v100, cpus_per_task: 2, mem: 200M, time: "00:05:00", cpu_bind: cores}
""")
    submit(spec)
    assert {r.state for r in wait_until_terminal("bind").tasks} == {"COMPLETED"}
    seen = attempt_files(tmp_path / "runs" / "bind", "started.json")
    assert sorted(seen) == [0, 1, 2]
    for info in seen.values():
        assert info["node"] in nodes_with("v100"), info  # v100 nodes only
        assert info["cuda_visible_devices"] in ("0", "1"), info  # exactly one GPU
        assert len(info["cpus"]) == 2, info  # cgroup cpuset + --cpu-bind=cores


def test_a_gpu_type_no_node_has_is_refused_naming_the_types_the_cluster_has(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, """\
name: h100
command: [python3, -c, "pass"]
resources: {gpus: 1, gpu_type: h100, mem: 100M, time: "00:05:00"}
""")
    refused = cli("submit", str(spec))
    # Slurm's own words, then the reason it does not give
    assert refused.returncode == 3 and "Requested node configuration is not available" in refused.stderr
    assert "no node has GPU type 'h100'; the cluster's types: a100, v100" in refused.stderr, refused.stderr


def test_program_exit_code_reaches_sacct(slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, """\
name: exits
command: [python3, -c, "import sys; sys.exit({code})"]
matrix: {code: [0, 3]}
resources: {mem: 200M, time: "00:05:00"}
""")
    submit(spec)
    rows = wait_until_terminal("exits").tasks
    assert [(r.state, r.exit_code) for r in rows] == [("COMPLETED", 0), ("FAILED", 3)]
    exits = attempt_files(tmp_path / "runs" / "exits", "exit.json")
    assert exits[1]["returncode"] == 3


def test_hostile_strings_reach_the_program_verbatim_and_run_nothing(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    marker = f"/tmp/campaignctl-pwned-{uuid.uuid4().hex[:8]}"
    hostile = [f"$(touch {marker}-1)", f"`touch {marker}-2`", f"; touch {marker}-3", "%x %j", "../../etc/passwd"]
    dump = ("import json,os,sys; "
            "open(os.environ['CAMPAIGNCTL_ATTEMPT_DIR']+'/argv.json','w').write(json.dumps(sys.argv[1:]))")
    spec = write_spec(tmp_path, "name: hostile\nresources: {mem: 200M, time: '00:05:00'}\n"
                      "env: {PAYLOAD: " + json.dumps(hostile[0]) + "}\n"
                      "command: " + json.dumps(["python3", "-c", dump, *hostile]) + "\n")
    submit(spec)
    assert wait_until_terminal("hostile").tasks[0].state == "COMPLETED"
    argv_file = next((tmp_path / "runs" / "hostile").glob("tasks/0/*/argv.json"))
    assert json.loads(argv_file.read_text()) == hostile
    assert not [p for p in Path("/tmp").glob(Path(marker).name + "*")]


def test_killed_right_after_sbatch_then_rerun_yields_no_duplicate_jobs(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    name = f"crash-{uuid.uuid4().hex[:6]}"
    spec = write_spec(tmp_path, f"""\
name: {name}
command: [python3, -c, "print({{i}})"]
matrix: {{i: [0, 1, 2, 3]}}
resources: {{mem: 200M, time: "00:05:00"}}
""")
    crashed = cli("submit", str(spec), env_extra={"CAMPAIGNCTL_FAULT": "after_sbatch"})
    assert crashed.returncode == 137
    held = own_jobs_named(name)
    assert len(held) == 1, held  # sbatch happened; the job waits, held, for its payloads
    rerun = cli("submit", str(spec), "--json")
    assert rerun.returncode == 0, rerun.stderr
    chunks = json.loads(rerun.stdout)["data"]["chunks"]
    assert [c["action"] for c in chunks] == ["recovered"]
    assert chunks[0]["job_id"] == held[0].split("|")[0]  # adopted, not resubmitted
    rows = wait_until_terminal(name).tasks
    assert [r.state for r in rows] == ["COMPLETED"] * 4 and all(r.attempts == 1 for r in rows)
    again = cli("submit", str(spec), "--json")
    assert json.loads(again.stdout)["data"]["sbatch_calls"] == 0
