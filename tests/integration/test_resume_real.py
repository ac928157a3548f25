"""`{resume?…}` decided by the checkpoint, on the real cluster: with a trainer that resumes as
timm's does (tests/programs/resume_like_timm.py), an OOM before the first save is retried without
`--resume` (it would stop "No checkpoint found", read as a bug), and a TIMEOUT after a save is
retried with `--resume <path>` written in the spec directly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import REPO, write_spec
from tests.integration.test_reconcile_real import history, latest, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm
OOM, TIMEOUT = 0, 1


def test_a_retry_resumes_only_where_a_checkpoint_was_saved(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "programs" / "resume_like_timm.py", tmp_path / "train.py")
    submit(write_spec(tmp_path, """\
name: timmlike
command: [python3, train.py, "{mode}", --output, "{checkpoint_dir}/run",
          "{resume?--resume}", "{resume?{checkpoint_dir}/run/last.pth.tar}"]
checkpoint: "{checkpoint_dir}/run/last.pth.tar"
tasks: [{mode: oom_first_epoch}, {mode: slow}]
resources: {cpus_per_task: 1, mem: 250M, time: "00:10:00"}
policy: {use: default, rules: {failed: {backoff: 2s}}}
"""))
    runs = tmp_path / "runs" / "timmlike" / "tasks"

    def saved_and_running() -> bool:
        reconcile("timmlike")
        row = latest("timmlike").get(TIMEOUT)
        return (row is not None and row.state == "RUNNING"
                and (runs / str(TIMEOUT) / "checkpoint" / "run" / "last.pth.tar").exists())
    wait_for("the slow task to save its first epoch", saved_and_running)
    proc.run(["scontrol", "update", f"JobId={latest('timmlike')[TIMEOUT].job_id}", "TimeLimit=0"])
    ticking_until_finished("timmlike")

    rows = history("timmlike")
    assert {(r.task_index, r.attempt_number): r.state for r in rows} == {
        (OOM, 1): "OUT_OF_MEMORY", (OOM, 2): "COMPLETED", (TIMEOUT, 1): "TIMEOUT", (TIMEOUT, 2): "COMPLETED"}
    mark = {t: runs / str(t) / "checkpoint" / "run" / "last.pth.tar" for t in (OOM, TIMEOUT)}
    retry = {r.task_index: (runs / str(r.task_index) / r.token / "output.log").read_text()
             for r in rows if r.attempt_number == 2}
    # the OOM came before any save (timm had written args.yaml only): the retry starts over
    assert retry[OOM].startswith(f"campaignctl: starting over: nothing at {mark[OOM]} to resume from\n")
    assert "--resume" not in retry[OOM] and "No checkpoint found" not in retry[OOM]
    # the TIMEOUT came after epoch 0 was saved: the retry resumes from it, with the path as written
    assert retry[TIMEOUT].startswith(f"campaignctl: resuming: {mark[TIMEOUT]} is there\n")
    assert f"'--resume', '{mark[TIMEOUT]}'" in retry[TIMEOUT]
    assert f"Loaded checkpoint '{mark[TIMEOUT]}' (epoch 0)" in retry[TIMEOUT]
