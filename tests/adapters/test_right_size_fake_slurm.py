"""right_size at submit against the fake Slurm, on SQLite and PostgreSQL: the profile's history
(attempts of an earlier campaign, their sacct facts written as reconcile would) sizes the next
campaign's submission in enforce mode, and only proposes in shadow mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import Position
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.core.usage.telemetry import Summary
from campaignctl.services import submit as submit_service
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


def spec(tmp_path: Path, name: str, policy: str = "default") -> Path:
    return write_spec(tmp_path, f"""\
name: {name}
profile: {{name: small, by: [model]}}
command: [python3, train.py, "{{model}}", "{{seed}}"]
matrix: {{model: [a, b], seed: [1, 2, 3]}}
resources: {{mem: 1G, time: "00:10:00"}}
policy: {policy}
""", name=f"{name}.yaml")


def ended_history(name: str, rss: str) -> None:
    """Every attempt of `name` COMPLETED after 6 s, peaking at `rss` (sacct MaxRSS)."""
    store = Store.open()
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE attempts SET state='COMPLETED', slurm_state='COMPLETED', "
                             f"elapsed_s=6, max_rss='{rss}'")


def submitted_mem(name: str) -> list[int]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return [json.loads(s.resources_json)["mem_mb"] for s in store.submissions(record.id)]


@pytest.mark.parametrize(("mode", "mem", "status"), [("enforce", [192, 192], "applied"),
                                                      ("shadow", [1024, 1024], "proposed")])
def test_the_next_campaign_of_a_profile_is_sized_from_its_history(
        tmp_path: Path, backend: str, fake_slurm: FakeSlurm, mode: str, mem: list[int], status: str) -> None:
    submit_service.submit(spec(tmp_path, "first"))
    ended_history("first", "163840K")  # 160 MB: × 1.2 = 192M
    policy = f"{{use: default, right_size: {{min_samples: 3, mode: {mode}}}}}"
    result = submit_service.submit(spec(tmp_path, "second", policy))
    assert submitted_mem("second") == mem  # one submission per group: model=a, model=b
    assert [c.size for c in result.chunks] == [3, 3]
    store = Store.open()
    record = store.campaign("second")
    assert record is not None
    logged = [e for e in DecisionLog(store.engine).entries(record.id) if e.rule == "right_size"]
    assert [(e.action, e.mode, e.status, e.params["group"]) for e in logged] == [
        ("size_first", mode, status, "rung 0, model=a"), ("size_first", mode, status, "rung 0, model=b")]
    assert logged[0].inputs["samples"] == 3 and logged[0].inputs["campaigns"] == ["first"]
    assert logged[0].params["mem_mb"] == 192 and logged[0].params["time_min"] == 2


def test_where_the_cgroup_s_working_set_was_sampled_it_sizes_the_next_campaign_not_maxrss(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    """MaxRSS of 900M that counts page cache (Slurm 24.11's jobacct_gather/cgroup on cgroup v1,
    tests/integration/test_cgroup_memory_real.py); the sampler read the cgroup's working set at
    150 MB and its processes' RSS at 20 MB: the request follows the working set (× 1.2, to 64M)."""
    submit_service.submit(spec(tmp_path, "first"))
    ended_history("first", "921600K")
    store = Store.open()
    with store.engine.connect() as conn:
        ids = [i for (i,) in conn.exec_driver_sql("SELECT id FROM attempts")]
    summary = Summary(samples=5, rss_max_mb=20.0, cgroup_mem_peak_mb=1000.0, cgroup_ws_peak_mb=150.0)
    TelemetryStore(store.engine).save([(i, Position(1, 100), summary) for i in ids])
    submit_service.submit(spec(tmp_path, "second", "{use: default, right_size: {min_samples: 3, mode: enforce}}"))
    assert submitted_mem("second") == [192, 192]


def test_too_few_samples_leave_the_spec_as_it_is(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit_service.submit(spec(tmp_path, "first"))
    ended_history("first", "163840K")
    submit_service.submit(spec(tmp_path, "second", "{use: default, right_size: {min_samples: 4, mode: enforce}}"))
    assert submitted_mem("second") == [1024]
    record = Store.open().campaign("second")
    assert record is not None
    assert not [e for e in DecisionLog(Store.open().engine).entries(record.id) if e.rule == "right_size"]


@pytest.mark.parametrize("poison", ["0", "-5K", "nanK", "infK", "999999999999999G"])
def test_a_poisoned_peak_never_sizes_a_submit_and_never_breaks_profile_show(
        tmp_path: Path, fake_slurm: FakeSlurm, poison: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26: rss 0, negative or NaN once asked `--mem=0M` (Slurm: the whole node); infinity
    made `profile show` and every right-sized submit exit 1."""
    from tests.conftest import run_main
    submit_service.submit(spec(tmp_path, "first"))
    ended_history("first", poison)  # sacct's MaxRSS, and the telemetry peak, say nonsense
    store = Store.open()
    with store.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO telemetry (attempt_id, inode, file_offset, summary_json, updated_at) "
                             "SELECT id, 0, 0, '{\"samples\": 3, \"rss_max_mb\": -1.0}', '' FROM attempts")
    policy = "{use: default, right_size: {min_samples: 3, mode: enforce}}"
    submit_service.submit(spec(tmp_path, "second", policy))
    assert submitted_mem("second") == [1024]  # too few believable samples: one submission at the spec's 1G
    code, out, _ = run_main(monkeypatch, capsys, "profile", "show", "small")
    assert code == 0 and "small" in out


def test_a_profile_pools_another_users_campaign_only_when_it_is_shared(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit_service.submit(spec(tmp_path, "theirs"))
    ended_history("theirs", "163840K")
    store = Store.open()
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE campaigns SET owner = 'mallory' WHERE name = 'theirs'")
    policy = "{use: default, right_size: {min_samples: 3, mode: enforce}}"
    submit_service.submit(spec(tmp_path, "mine", policy))
    assert submitted_mem("mine") == [1024]  # mallory's history sizes nothing of ours
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE revisions SET settings_json = REPLACE(settings_json, "
                             "'\"by\": [\"model\"]', '\"by\": [\"model\"], \"shared\": true') "
                             "WHERE campaign_id = (SELECT id FROM campaigns WHERE name = 'theirs')")
    submit_service.submit(spec(tmp_path, "mine2", policy))
    assert submitted_mem("mine2") == [192, 192]  # shared explicitly: pooled
