"""right_size on the real cluster: a profile learnt from one campaign sizes the next one's
submission, and a campaign's own early tasks lower its pending siblings in place."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import LoggedDecision
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import history, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm
HERE = Path(__file__).parent
RIGHT_SIZE = "right_size: {min_samples: 3, mode: enforce}"


def campaign(tmp_path: Path, name: str, profile: str, tasks: int, policy: str = "", throttle: int = 4,
             mb: int = 150) -> str:
    submit(campaign_spec(tmp_path, name, profile, tasks, policy, throttle, mb))
    return name


def campaign_spec(tmp_path: Path, name: str, profile: str, tasks: int, policy: str = "", throttle: int = 4,
                  mb: int = 150) -> Path:
    """`tasks` tasks of one kind of work: `mb` MB resident for 4 s, asking 1G and 10 minutes."""
    shutil.copy(HERE / "alloc_task.py", tmp_path / "alloc.py")
    return write_spec(tmp_path, f"""\
name: {name}
profile: {profile}
command: [python3, alloc.py, "{mb}", "4"]
matrix: {{seed: {list(range(tasks))}}}
resources: {{mem: 1G, time: "00:10:00"}}
array: {{max_parallel: {throttle}}}
telemetry: {{interval: 1s}}
policy: {{use: default{", " + policy if policy else ""}}}
""", name=f"{name}.yaml")


def slurm_limits(job_id: str) -> tuple[str, str]:
    """(MinMemoryNode, TimeLimit) as slurmctld holds them, e.g. ('256M', '00:02:00')."""
    text = proc.run(["scontrol", "show", "job", job_id]).stdout
    mem = re.search(r"MinMemoryNode=(\S+)", text)
    limit = re.search(r"TimeLimit=(\S+)", text)
    assert mem and limit, text
    return mem.group(1), limit.group(1)


def right_size_entries(name: str) -> list[LoggedDecision]:
    return [e for e in logged(name) if e.rule == "right_size"]


def test_a_profile_learnt_from_one_campaign_sizes_the_next_ones_submission(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    profile = f"rs-{tag}"
    first = campaign(tmp_path, f"rightsize-first-{tag}", profile, 4)
    ticking_until_finished(first)
    assert {row.state for row in history(first)} == {"COMPLETED"}

    second = f"rightsize-second-{tag}"
    path = campaign_spec(tmp_path, second, profile, 3, RIGHT_SIZE)
    dry = cli("submit", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "right_size: rung 0: 4 ended attempts" in dry.stdout and "instead of 1024M / 10 min" in dry.stdout
    assert "#SBATCH --time=2\n" in dry.stdout and "#SBATCH --mem=1024M" not in dry.stdout
    submit(path)
    job = history(second)[0].job_id
    assert job is not None
    mem, limit = slurm_limits(job)
    # ~150 MB used (plus the runner): q0.95 × 1.2, rounded up to 64M; 1G was asked
    assert mem in ("192M", "256M", "320M"), mem
    assert limit == "00:02:00"  # ~6 s × 1.3, never under 2 minutes; 10 minutes were asked
    ticking_until_finished(second)
    assert {row.state for row in history(second)} == {"COMPLETED"}
    [sized] = right_size_entries(second)
    assert sized.action == "size_first" and sized.status == "applied"
    assert sized.inputs["samples"] == 4 and sized.inputs["campaigns"] == [first]
    assert sized.inputs["asked"] == {"mem_mb": 1024, "time_min": 10}
    assert f"{sized.params['mem_mb']}M" == mem and "instead of 1024M / 10 min" in sized.reason
    shown = cli("profile", "show", profile, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)["data"]
    [group] = data["groups"]
    assert (group["group"], group["samples"], group["right_sized"], group["wrong"]) == ("rung 0", 7, 3, 0)
    assert 150 <= group["rss_mb"]["p50"] <= 250, group
    use = {c["campaign"]: c for c in data["campaigns"]}
    assert use[first]["asked_mem_mb"] == 1024 and use[second]["asked_mem_mb"] == int(mem[:-1])
    assert use[first]["would_ask_mem_mb"] < 1024


def test_a_right_sized_attempt_that_runs_out_of_memory_is_retried_and_counted_wrong(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    profile = f"rs-oom-{tag}"
    ticking_until_finished(campaign(tmp_path, f"rightsize-small-{tag}", profile, 3))
    # the same profile, but this time the work needs 350 MB: right-sized to ~256M, it is OOM-killed
    bigger = campaign(tmp_path, f"rightsize-bigger-{tag}", profile, 1, RIGHT_SIZE, mb=350)
    ticking_until_finished(bigger, timeout_s=300)
    rows = history(bigger)
    assert rows[0].state == "OUT_OF_MEMORY" and rows[-1].state == "COMPLETED"
    first_mem = json.loads(rows[0].resources_json)["mem_mb"]
    assert first_mem < 1024  # right-sized
    # the usual rule: memory × 1.5 per OOM retry, from the right-sized limit
    assert json.loads(rows[1].resources_json)["mem_mb"] == int(first_mem * 1.5)
    listed = json.loads(cli("profile", "list", "--json").stdout)["data"]["profiles"]
    [mine] = [p for p in listed if p["name"] == profile]
    assert mine["right_sized"] == 1 and mine["wrong"] == 1


def test_early_tasks_far_under_their_limit_lower_the_pending_siblings_in_place(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    name = campaign(tmp_path, f"rightsize-lower-{tag}", f"rs-lower-{tag}", 7, RIGHT_SIZE, throttle=1)
    array = (history(name)[0].job_id or "").partition("_")[0]
    assert array

    def lowered() -> bool:
        reconcile(name)
        return any(e.action == "resize_pending" for e in right_size_entries(name))
    wait_for("a right_size lowering", lowered, timeout_s=240)
    resized = [e for e in right_size_entries(name) if e.action == "resize_pending"]
    assert {e.status for e in resized} == {"applied"}
    assert all(e.inputs["samples"] >= 3 for e in resized)
    [jobs] = {str(e.detail["jobs"]) for e in resized}  # one scontrol update for the array
    assert jobs.startswith(f"{array}_[")
    new_mem = f"{resized[0].params['resources']['mem_mb']}M"  # type: ignore[index]
    pending = proc.run(["squeue", "-r", "-h", "-j", array, "-t", "PD", "-o", "%i|%m|%l"]).stdout.split()
    assert pending, "every sibling started before the check: nothing left to see pending"
    decided = {e.attempt_token.rsplit(".", 1)[1] for e in resized}
    for line in pending:  # the lowered elements that are still pending hold the new limits
        element, mem, limit = line.split("|")
        if element.split("_")[1] in decided:
            assert (mem, limit) == (new_mem, "4:00"), line  # 10 min asked: USR2@90 stays, 4 min is the least
    assert any(line.split("|")[1:] == [new_mem, "4:00"] for line in pending), pending
    ticking_until_finished(name, timeout_s=300)
    # (twice in CI, lowered to 2 minutes, an attempt ended FAILED 140: the USR2 submitted with the
    # 10-minute limit came at its start; the message names any non-COMPLETED attempt's evidence)
    assert {row.state for row in history(name)} == {"COMPLETED"}, [
        (r.task_index, r.attempt_number, r.state, r.slurm_state, r.exit_code, r.max_rss, r.elapsed_s,
         r.resources_json, r.cause, r.evidence) for r in history(name) if r.state != "COMPLETED"]
