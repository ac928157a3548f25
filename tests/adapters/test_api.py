"""The Python API against the fake Slurm: a campaign built in code is rendered to YAML, validated
like a spec file, stored as that YAML (so revisions, rollback and replay re-read it), and its run
directory is where `workdir` says, never in a temporary directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from campaignctl import api
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import InputError, NotFoundError, SpecError
from campaignctl.services.dispatch import revision_spec
from campaignctl.services.rollback import rollback
from tests.conftest import run_main
from tests.fakeslurm import FakeSlurm

COMMAND = ["python3", "train.py", "--lr", "{lr}"]


def sweep(workdir: Path, **changes: object) -> api.Campaign:
    spec = {"name": "api-sweep", "command": COMMAND, "matrix": {"lr": [0.1, 0.01, 0.001]},
            "resources": {"mem": "500M", "time": "1:30:00"}, "description": "no", **changes}
    return api.Campaign.from_dict(spec, workdir=workdir)


def test_dry_run_submits_nothing_and_puts_the_run_dir_under_workdir(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    campaign = sweep(Path("exp"))
    result = campaign.dry_run()
    assert result.outcome == "dry-run" and result.tasks == 3 and fake_slurm.submitted == 0
    assert campaign.spec.run_dir == str(tmp_path / "exp" / "runs" / "api-sweep")
    assert f"--output={tmp_path / 'exp' / 'runs' / 'api-sweep' / 'slurm'}" in result.script
    # YAML 1.1 would read 1:30:00 as 5400 and `no` as False: rendered quoted, read as meant
    assert campaign.spec.resources.time_min == 90 and campaign.spec.description == "no"
    assert "time: '1:30:00'" in campaign.yaml


def test_submit_stores_the_rendered_yaml_as_the_revision_and_rollback_restores_it(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    first = sweep(tmp_path)
    created = first.submit(reason="first try")
    assert (created.outcome, created.revision, fake_slurm.submitted) == ("created", 1, 1)
    store = Store.open()
    record = store.campaign("api-sweep")
    assert record is not None and record.run_dir == str(tmp_path / "runs" / "api-sweep")
    stored = store.revision(record.id, 1)
    assert stored.spec_text == first.yaml and yaml.safe_load(stored.spec_text)["command"] == COMMAND
    assert stored.spec_path == str(tmp_path / "api-sweep.yaml")
    assert revision_spec(store, record.id, 1).spec_hash == first.spec.spec_hash  # re-read from the store
    assert sweep(tmp_path).submit().outcome == "unchanged"

    bigger = sweep(tmp_path, resources={"mem": "800M", "time": "1:30:00"})
    revised = bigger.submit(reason="more memory")
    assert (revised.outcome, revised.revision) == ("revised", 2)
    assert store.revision(record.id, 2).reason == "more memory"

    back = rollback("api-sweep", to=1)
    restored = store.revision(record.id, back.new_revision or 0)
    assert restored.spec_text == first.yaml and restored.kind == "rollback"
    assert revision_spec(store, record.id, restored.number).resources.mem_mb == 500
    code, out, _ = run_main(monkeypatch, capsys, "revisions", "api-sweep")
    assert code == 0 and "more memory" in out


def test_keyword_arguments_are_the_spec_keys(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign = api.Campaign(name="api-kw", command=COMMAND, matrix={"lr": [1, 2]}, workdir=tmp_path,
                            run_dir="elsewhere/api-kw", budget={"gpu_hours": 2})
    assert campaign.spec.run_dir == str(tmp_path / "elsewhere" / "api-kw")
    assert [t.params for t in campaign.spec.tasks] == [{"lr": 1}, {"lr": 2}]
    assert campaign.spec.budget.gpu_hours == 2
    from_file = {"name": "api-kw", "command": COMMAND, "matrix": {"lr": [1]}, "run_dir": "mine"}  # its own run_dir
    assert api.Campaign.from_dict(from_file, workdir=tmp_path).spec.run_dir == str(tmp_path / "mine")


@pytest.mark.parametrize(("build", "expected"), [
    (lambda d: api.Campaign.from_dict({"name": "x", "command": COMMAND, "matrix": {"lr": [1]}}),
     "workdir: required"),
    (lambda d: api.Campaign.from_dict({"name": "x", "command": COMMAND, "workdir": str(d)}, workdir=d),
     "workdir: given both"),
    (lambda d: api.Campaign(name="x", command=COMMAND, matrix={"lr": [1]}, gpus=2, workdir=d), "gpus"),
    (lambda d: api.Campaign(name="x", command=COMMAND, matrix={"lr": [object()]}, workdir=d), "not plain data"),
])
def test_a_bad_spec_raises_the_clis_spec_error(tmp_path: Path, build, expected: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError) as raised:
        build(tmp_path)
    assert raised.value.exit_code == 3 and expected in raised.value.message


def test_status_and_results_read_back_as_plain_data(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign = sweep(tmp_path)
    campaign.submit()
    [array] = [j.job_id for j in fake_slurm.live_jobs()]
    fake_slurm.set_state(array, 0, "RUNNING", elapsed="00:06:00")
    status = campaign.status()
    assert json.loads(json.dumps(status))["tasks"][0]["state"] == "RUNNING"
    assert status["tasks"][0]["efficiency"]["time"] == pytest.approx(6 / 90)  # type: ignore[index]
    rows = api.results("api-sweep")
    assert [r["config"] for r in rows] == [0, 1, 2] and [r["lr"] for r in rows] == [0.1, 0.01, 0.001]
    assert all(r["metric"] is None and r["final"] is None for r in rows)  # nothing reported yet
    with pytest.raises(InputError):
        campaign.results(metric="val_loss")
    with pytest.raises(NotFoundError):
        api.status("no-such-campaign")
