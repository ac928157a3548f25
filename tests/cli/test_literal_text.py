"""User and Slurm text is printed as written: square brackets are never read as rich markup
(`[/]` used to crash the error boundary with a MarkupError, `node[1-2]` printed as `node`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import REPO, run_main, write_spec
from tests.fakeslurm import FakeSlurm

# Slurm 22.05's refusal of an impossible request, as sbatch prints it, with a hostlist in it.
SBATCH_REFUSAL = ("sbatch: error: Batch job submission failed: Requested node configuration is not "
                  "available [/] node[1-2]")


def test_a_spec_value_with_markup_is_shown_literally_in_the_error(
        tmp_path: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, 'name: x\ncommand: [echo]\nresources: {partition: "[/]"}\n')
    code, _, err = run_main(monkeypatch, capsys, "submit", str(spec), "--dry-run")
    assert code == 3 and "resources.partition: '[/]' is not allowed" in err


def test_slurms_refusal_text_reaches_the_user_verbatim(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake_slurm.fail_always["sbatch"] = SBATCH_REFUSAL
    spec = write_spec(tmp_path, "name: refused\ncommand: [echo]\ntasks: [{}]\n")
    code, _, err = run_main(monkeypatch, capsys, "submit", str(spec))
    assert code == 69 and "not available [/] node[1-2]" in err


def test_params_reasons_and_node_lists_print_as_written(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, 'name: lit\ncommand: [echo, "{data}"]\ntasks: [{data: "[/data/a]"}]\n')
    submit(spec)
    (job_id,) = fake_slurm.jobs
    fake_slurm.jobs[job_id].held = False
    fake_slurm.set_state(job_id, 0, "RUNNING", nodes="node[1-2]")
    reconcile("lit")
    code, out, _ = run_main(monkeypatch, capsys, "status", "lit", "--wide")  # the node is a --wide column
    assert code == 0 and "data=[/data/a]" in out and "node[1-2]" in out
    policy = REPO / "campaignctl" / "policies" / "conservative.yaml"
    code, out, err = run_main(monkeypatch, capsys, "policy", "set", "lit", str(policy), "--reason", "[b]x[/] [/]")
    assert code == 0 and "(policy: [b]x[/] [/])" in out, err
    code, out, _ = run_main(monkeypatch, capsys, "revisions", "lit")
    assert code == 0 and "[b]x[/] [/]" in out
