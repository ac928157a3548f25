"""The element's bootstrap (adapters/job_main.py), run as an array element's srun runs it: a
fresh `python -m campaignctl.adapters.job_main FOLDER` with the variables Slurm sets, finding the
call staged for its own element. On the lab every real-cluster test runs its tasks through it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from campaignctl.adapters import job_main
from campaignctl.adapters.job_main import dump_call, payload_path
from tests.conftest import COMMAND_TIMEOUT_S, REPO

HEAVY = ("numpy", "submitit", "sqlalchemy", "asyncio", "yaml")


def element(folder: Path, job: str, index: int, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_ARRAY_JOB_ID": job, "SLURM_ARRAY_TASK_ID": str(index), **extra}
    return subprocess.run([sys.executable, "-u", "-m", "campaignctl.adapters.job_main", str(folder)], env=env,
                          capture_output=True, text=True, cwd=REPO, timeout=COMMAND_TIMEOUT_S)


def test_each_element_runs_its_own_call_with_the_standard_library_alone(tmp_path: Path) -> None:
    report = f"import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    dump_call((exec, (report,)), payload_path(tmp_path, "41_0"))
    dump_call((sys.exit, (7,)), payload_path(tmp_path, "41_1"))
    first, second = element(tmp_path, "41", 0), element(tmp_path, "41", 1)
    assert (first.returncode, first.stdout) == (0, "[]\n"), first.stderr  # no numpy, no submitit: 0.45 s less
    assert second.returncode == 7  # the runner's SystemExit is the element's status, as sacct shows it


def test_an_element_without_its_payload_says_which_file_it_waited_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_main, "PAYLOAD_WAIT_S", 0)
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "42")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    with pytest.raises(SystemExit) as ended:
        job_main.main([str(tmp_path)])
    assert f"no payload at {tmp_path}/42_3_submitted.pkl after 0 s" in str(ended.value.code)
