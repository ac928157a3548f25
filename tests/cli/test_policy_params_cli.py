"""`policy set` refuses a rule whose `params` name a parameter no task of the campaign has."""

from __future__ import annotations

from pathlib import Path

from campaignctl.services.submit import submit
from tests.cli.test_cli import assert_user_error, run_cli
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


def test_policy_set_refuses_params_no_task_has(tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, "name: p\ncommand: [python3, x.py, '{batch}']\nmatrix: {batch: [64]}\n"))
    typo = tmp_path / "typo.yaml"
    typo.write_text("name: t\nrules: {gpu_out_of_memory: {params: {batch_size: {factor: 0.5}}}}\n")
    assert_user_error(run_cli("policy", "set", "p", str(typo), state=state_home), 3,
                      "'batch_size', which no task has; task parameters: batch")
    good = tmp_path / "good.yaml"
    good.write_text("name: g\nrules: {gpu_out_of_memory: {params: {batch: {factor: 0.5, min: 1}}}}\n")
    done = run_cli("policy", "set", "p", str(good), state=state_home)
    assert done.returncode == 0, done.stderr
    listing = run_cli("revisions", "p", "--diff", "2", state=state_home)
    assert '"factor": 0.5' in listing.stdout
