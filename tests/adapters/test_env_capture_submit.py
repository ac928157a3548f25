"""submit captures the submitting environment once per revision; every later submission of that
revision (reconcile's retries, recovery, a rollback's new revision) carries the same file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from campaignctl.adapters.env_capture import read_captured_env
from campaignctl.adapters.revision_rows import CAPTURED_ENV
from campaignctl.adapters.store import Store
from campaignctl.core.slurm.plan import ArrayChunk
from campaignctl.services import submit as submit_service
from campaignctl.services.dispatch import launches, revision_spec
from campaignctl.services.rollback import rollback
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


def spec_text(lr: str) -> str:
    return f"""\
name: envcap
command: [python3, train.py, --lr, "{lr}"]
setup: [module load cuda/12.4]
env_capture: {{exclude: [CC_HIDDEN]}}
metrics: {{from_output: 'step (?P<step>\\d+): val loss (?P<val_loss>[\\d.]+)'}}
"""


def captured_of(store: Store, number: int) -> str:
    record = store.campaign("envcap")
    assert record is not None
    return str(json.loads(store.revision(record.id, number).settings_json).get(CAPTURED_ENV, ""))


def test_each_spec_revision_gets_its_own_capture_and_every_launch_carries_it(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC_MARKER", "one")
    monkeypatch.setenv("CC_HIDDEN", "secret")
    monkeypatch.setenv("SLURM_JOB_ID", "99")  # submitting from inside an allocation
    submit_service.submit(write_spec(tmp_path, spec_text("0.1")))
    store = Store.open()
    first = captured_of(store, 1)
    env = read_captured_env(first)
    assert env["CC_MARKER"] == "one" and "CC_HIDDEN" not in env and "SLURM_JOB_ID" not in env
    assert stat.S_IMODE(Path(first).stat().st_mode) == 0o600

    monkeypatch.setenv("CC_MARKER", "two")
    assert submit_service.submit(write_spec(tmp_path, spec_text("0.1"))).outcome == "unchanged"
    assert len(list(Path(first).parent.iterdir())) == 1  # once per revision, not per submit
    submit_service.submit(write_spec(tmp_path, spec_text("0.2")))
    second = captured_of(store, 2)
    assert second != first and read_captured_env(second)["CC_MARKER"] == "two"

    record = store.campaign("envcap")
    assert record is not None
    spec = revision_spec(store, record.id, 1)
    (launch,) = launches(spec, "tok", ArrayChunk(task_indices=(0,), throttle=None))
    assert launch.env_file == first and launch.setup == ("module load cuda/12.4",)
    assert launch.output_metrics == spec.output_metrics != ()
    assert revision_spec(store, record.id, 2).captured_env == second

    rollback("envcap", to=1)
    assert captured_of(store, 3) == first  # the rollback restores the environment with the content
    assert revision_spec(store, record.id, 3).captured_env == first


def test_dry_run_shows_the_setup_lines_and_captures_nothing(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    result = submit_service.submit(write_spec(tmp_path, spec_text("0.1")), dry_run=True)
    assert result.setup == ["module load cuda/12.4"]
    assert not (tmp_path / "runs").exists()
