"""The job side of a pack (adapters/pack_runner.py) with a stand-in `srun` on PATH that records
its options and runs the command (the real cluster's steps, with --overlap and their own memory
limits, are tested on the lab): every packed task runs as its own step under its token, writes
its own attempt's files, and one task's failure leaves its neighbours to finish."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from campaignctl.adapters import packed_task
from campaignctl.adapters.pack_runner import run_pack
from campaignctl.adapters.packed_task import ForeignPayloadError
from campaignctl.core.pack_plan import PackShape, plan_packs
from campaignctl.core.resources import Resources
from campaignctl.core.task_launch import TaskLaunch

FAKE_SRUN = """#!/bin/sh
# records its options, then runs what follows them (real srun starts a step; here a process)
log="$FAKE_SRUN_LOG"
opts=""
while [ $# -gt 0 ]; do case "$1" in --*) opts="$opts $1"; shift;; *) break;; esac; done
echo "$opts CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" >> "$log"
exec "$@"
"""


@pytest.fixture
def fake_srun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    log = tmp_path / "srun.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SRUN_LOG", str(log))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # the pack's one GPU, as Slurm sets it
    return log


def launch(tmp_path: Path, task: int, code: int) -> TaskLaunch:
    program = (sys.executable, "-c", f"import sys; print('task {task}'); sys.exit({code})")
    return TaskLaunch("c", task, f"tok{task}.{task}", program, {}, str(tmp_path), str(tmp_path / "tasks" / str(task)),
                      telemetry_interval_s=0)


def test_each_packed_task_is_its_own_step_and_a_failing_one_leaves_the_others(tmp_path: Path, fake_srun: Path) -> None:
    [pack] = plan_packs([0, 1, 2], Resources(gpus=1, cpus_per_task=2, mem_mb=3000), PackShape(3, per_gpu=4))
    launches = [launch(tmp_path, 0, 0), launch(tmp_path, 1, 3), launch(tmp_path, 2, 0)]
    assert run_pack(pack, launches) == 1  # one step failed
    codes = {t: json.loads((tmp_path / "tasks" / str(t) / f"tok{t}.{t}" / "exit.json").read_text())["returncode"]
             for t in range(3)}
    assert codes == {0: 0, 1: 3, 2: 0}
    assert (tmp_path / "tasks" / "2" / "tok2.2" / "output.log").read_text().strip().endswith("task 2")
    calls = sorted(fake_srun.read_text().splitlines())
    assert len(calls) == 3 and all("--overlap" in c and "--mem=3000M" in c and "--cpus-per-task=2" in c
                                   and "CUDA_VISIBLE_DEVICES=3" in c for c in calls)
    assert sorted(c.split("--job-name=")[1].split()[0] for c in calls) == ["tok0.0", "tok1.1", "tok2.2"]


def test_a_launch_file_that_is_not_the_user_s_private_one_is_never_run(tmp_path: Path, fake_srun: Path) -> None:
    """In a shared campaign a group member can write in the attempt directory: a launch file
    another may write, or one left in place beforehand, is not what a step runs."""
    [pack] = plan_packs([0], Resources(gpus=1, mem_mb=300), PackShape(1))
    one = launch(tmp_path, 0, 0)
    one.paths.folder.mkdir(parents=True)
    planted = one.paths.launch
    planted.write_bytes(b"not a pickle of ours")
    assert run_pack(pack, [one]) == 0  # the runner writes its own file in its place, private
    assert oct(planted.stat().st_mode & 0o777) == "0o600"
    planted.chmod(0o620)  # group-writable: a member could have changed it
    with pytest.raises(ForeignPayloadError, match="not this user's private launch file"):
        packed_task.main(str(planted))


REFUSING_SRUN = """#!/bin/sh
# real srun's words when a step's CPU binding lies outside its allocation (the lab, task/affinity)
case "$*" in *tok1.1*)
  echo "srun: error: CPU binding outside of job step allocation, allocated CPUs are: 0x1." >&2
  echo "srun: error: Task launch for StepId=13380_0.2 failed on node node2: Unable to satisfy cpu bind request" >&2
  exit 1;;
esac
while [ $# -gt 0 ]; do case "$1" in --*) shift;; *) break;; esac; done
exec "$@"
"""


def test_a_step_srun_never_started_is_a_launch_failure_with_srun_s_words_in_its_output(
        tmp_path: Path, fake_srun: Path) -> None:
    (fake_srun.parent / "bin" / "srun").write_text(REFUSING_SRUN)
    [pack] = plan_packs([0, 1, 2], Resources(gpus=1, cpus_per_task=1, mem_mb=300), PackShape(3, per_gpu=4))
    assert run_pack(pack, [launch(tmp_path, t, 0) for t in range(3)]) == 1
    refused = tmp_path / "tasks" / "1" / "tok1.1"
    info = json.loads((refused / "exit.json").read_text())
    assert info["cause"] == "launch_failed" and info["returncode"] == 1
    assert "Unable to satisfy cpu bind request" in info["evidence"]
    assert (refused / "output.log").read_text().startswith(
        "campaignctl: the task's step did not start: srun: error: CPU binding outside of job step allocation")
    for ran in (0, 2):  # its neighbours ran, and their exit.json is their own
        done = json.loads((tmp_path / "tasks" / str(ran) / f"tok{ran}.{ran}" / "exit.json").read_text())
        assert done["returncode"] == 0 and done["cause"] is None
