"""A progressive campaign against the fake Slurm: rung 0 is submitted, reconcile promotes the
survivors as new arrays with the next rung's resources and the config's checkpoint, the budget
gates promotion. (The real-cluster run is tests/integration/test_ladder_real.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.adapters import slurm
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.job_main import load_call, payload_path
from campaignctl.adapters.runner import task_environment
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import SlurmUnavailableError, SpecError
from campaignctl.services.reconcile import reconcile
from campaignctl.services.resume import resume
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.cli.test_cli import run_cli
from tests.conftest import run_main, write_spec
from tests.fakeslurm import FakeSlurm

LOSS = {0: 0.6, 1: 0.2, 2: 0.9, 3: 0.4, 4: 0.3, 5: 0.8}  # by config; rung 0 keeps 1, 4, 3


def ladder_spec(tmp_path: Path, budget: float = 10.0) -> Path:
    return write_spec(tmp_path, f"""\
name: lad
command: [python3, train.py, "{{lr}}", "{{steps}}"]
matrix: {{lr: [0, 1, 2, 3, 4, 5]}}
resources: {{gpus: 1, time: "00:10:00", mem: 500M}}
budget: {{gpu_hours: {budget}}}
rungs:
  - {{name: screen, params: {{steps: 5}}, promote: {{metric: loss, eta: 2}}}}
  - {{name: grow, params: {{steps: 15}}, resources: {{time: "00:20:00"}}, promote: {{metric: loss, eta: 3}}}}
  - {{name: full, params: {{steps: 45}}, resources: {{gpus: 2}}}}
""")


def finish_rung(tmp_path: Path, fake: FakeSlurm, job_id: str, loss: dict[int, float]) -> None:
    """Every element of `job_id` COMPLETED, having reported its config's loss."""
    store = Store.open()
    record = store.campaign("lad")
    assert record is not None
    mine = [a for a in store.attempts(record.id) if a.job_id and a.job_id.startswith(job_id + "_")]
    for a in mine:
        path = tmp_path / "runs" / "lad" / "tasks" / str(a.task_index) / a.token / "metrics.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"step": 1, "loss": 5.0}) + "\n"
                        + json.dumps({"step": 2, "loss": loss[a.task_index % 6]}) + "\n")
        fake.set_state(job_id, a.array_index, "COMPLETED")


def newest_array(fake: FakeSlurm) -> str:
    return max(fake.jobs, key=int)


def test_three_rungs_promote_the_expected_configs_then_finish(tmp_path: Path, fake_slurm: FakeSlurm,
                                                              state_home: Path) -> None:
    submit(ladder_spec(tmp_path))
    assert len(fake_slurm.jobs) == 1 and fake_slurm.jobs[newest_array(fake_slurm)].size == 6
    finish_rung(tmp_path, fake_slurm, newest_array(fake_slurm), LOSS)
    tick = reconcile("lad").campaigns[0]
    promoted = sorted(d.task for d in tick.decisions if d.action == "promote")
    assert promoted == [6 + 1, 6 + 3, 6 + 4] and all(d.status == "applied" for d in tick.decisions)
    assert sorted(d.task for d in tick.decisions if d.action == "retire") == [0, 2, 5]
    rung1 = newest_array(fake_slurm)
    assert len(fake_slurm.jobs) == 2 and fake_slurm.jobs[rung1].size == 3

    store = Store.open()
    record = store.campaign("lad")
    assert record is not None
    sub = next(s for s in store.submissions(record.id) if s.job_id == rung1)
    assert sub.kind == "promotion" and json.loads(sub.resources_json)["time_min"] == 20
    _, (launch,) = load_call(payload_path(Path(sub.folder), f"{rung1}_0"))
    env = task_environment(launch)
    assert launch.task_index == 7 and launch.argv[-2:] == ("1", "15")  # config 1, grow's 15 steps
    assert env["CAMPAIGNCTL_CHECKPOINT_DIR"] == str(tmp_path / "runs" / "lad" / "tasks" / "1" / "checkpoint")
    assert env["CAMPAIGNCTL_RESUME"] == "1" and env["CAMPAIGNCTL_RUNG"] == "1"
    for index in range(3):
        fake_slurm.set_state(rung1, index, "RUNNING")
    assert reconcile("lad").campaigns[0].decisions == []  # nothing twice while rung 1 runs

    finish_rung(tmp_path, fake_slurm, rung1, {1: 0.1, 3: 0.05, 4: 0.3})
    tick = reconcile("lad").campaigns[0]
    assert [d.task for d in tick.decisions if d.action == "promote"] == [12 + 3]  # floor(3/3) = 1: config 3
    rung2 = newest_array(fake_slurm)
    assert json.loads(next(s for s in store.submissions(record.id) if s.job_id == rung2).resources_json)["gpus"] == 2
    fake_slurm.set_state(rung2, 0, "COMPLETED")
    assert reconcile("lad").campaigns[0].state == "finished"
    entries = DecisionLog(store.engine).entries(record.id, actions=("promote",))
    assert [e.inputs["rank"] for e in entries] == [1, 3, 2, 1]  # configs 1, 3, 4 then 3: the evidence is logged
    assert entries[-1].inputs["ranking"] == {"1": 0.1, "3": 0.05, "4": 0.3}
    rows = {r.index: r.last_decision for r in status("lad").tasks}
    # issue 28: a promoted task said `-` where a retired one said `retire (promotion)`
    assert rows[1] == rows[9] == rows[15] == "promote (promotion) applied"  # config 1 kept by screen, 3 by grow
    assert rows[0] == rows[7] == "retire (promotion) applied"  # config 0 left at screen, 1 at grow
    shown = status("lad").campaigns[0]
    assert shown.counts == {"NOT_PROMOTED": 8, "COMPLETED": 10}
    assert [(r.name, r.started, r.promoted) for r in shown.rungs] == [
        ("screen", 6, 3), ("grow", 3, 1), ("full", 1, None)]
    assert "rungs: screen [COMPLETED 6] → 3 promoted · grow [COMPLETED 3] → 1 promoted · full [COMPLETED 1]" \
        in shown.summary
    exported = run_cli("metrics", "lad", state=state_home).stdout
    assert 'campaignctl_tasks{campaign="lad",state="NOT_PROMOTED"} 8' in exported
    shown_log = run_cli("log", "lad", state=state_home)
    assert shown_log.returncode == 0, shown_log.stderr
    assert "task 15" in shown_log.stdout and "promotion → promote applied" in shown_log.stdout
    assert "config 3: loss 0.05 ranks 1 of 3 in rung grow; kept by best 1/3 by loss (min): promoted to rung full." \
        in shown_log.stdout


def test_a_promotion_the_budget_cannot_pay_pauses_until_the_budget_is_raised(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(ladder_spec(tmp_path, budget=1.0))  # rung 1 would need 3 × 1 GPU × 20 min = 1 GPU-h more
    finish_rung(tmp_path, fake_slurm, newest_array(fake_slurm), LOSS)
    tick = reconcile("lad").campaigns[0]
    assert [(d.rule, d.action, d.status) for d in tick.decisions] == [("promotion", "hold", "applied")]
    assert "would cost up to 1 GPU-h but only" in tick.decisions[0].reason
    assert tick.state == "paused" and len(fake_slurm.jobs) == 1
    assert reconcile("lad").campaigns[0].decisions == []  # paused: not asked again each tick
    submit(ladder_spec(tmp_path, budget=2.0))  # a new revision with more budget, then resume
    resume("lad", reason="budget raised for rung 1")
    tick = reconcile("lad").campaigns[0]
    assert sorted(d.task for d in tick.decisions if d.action == "promote") == [7, 9, 10]
    assert len(fake_slurm.jobs) == 2


def test_a_later_rung_slurm_would_refuse_is_refused_at_submit_before_anything_runs(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    # `sbatch --test-only` per later rung; the first (grow) is refused as a rung asking for more
    # GPUs than a node has would be
    fake_slurm.fail_next["sbatch"] = "allocation failure: Requested node configuration is not available"
    with pytest.raises(SpecError) as refused:
        submit(ladder_spec(tmp_path))
    assert refused.value.problems == [
        "rungs[1] (grow): Slurm would refuse its tasks: Requested node configuration is not available"]
    assert "nothing was submitted" in refused.value.hint
    assert Store.open().campaign("lad") is None and not fake_slurm.jobs
    # every later rung is asked, then the first array
    assert [a[:2] for a in fake_slurm.argvs] == [("sbatch", "--test-only")] * 3

    # again: only the rung refused before is asked; what Slurm took once in this process is not
    # (rung 2, the first array: the same request whatever its array's name and folder)
    submit(ladder_spec(tmp_path))
    assert [a[1] for a in fake_slurm.argvs if a[0] == "sbatch"][3:] == ["--test-only", "--parsable"]
    slurm.forget_site()  # a later `campaignctl submit`: a new process, which asks Slurm again
    fake_slurm.fail_next["sbatch"] = "allocation failure: Invalid partition name specified"
    with pytest.raises(SpecError):  # a changed spec is asked again, and no revision is recorded
        submit(ladder_spec(tmp_path, budget=20.0))
    record = Store.open().campaign("lad")
    assert record is not None and record.current_revision == 1

    fake_slurm.fail_next["sbatch"] = "sbatch: fatal: Could not establish a configuration source"
    with pytest.raises(SlurmUnavailableError):  # not a refusal: Slurm could not be asked
        submit(ladder_spec(tmp_path, budget=30.0))


def test_resume_at_the_promotion_gate_says_the_budget_still_cannot_pay_and_force_lets_it_pass(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    submit(ladder_spec(tmp_path, budget=1.0))  # rung 1 would need 3 × 1 GPU × 20 min = 1 GPU-h more
    finish_rung(tmp_path, fake_slurm, newest_array(fake_slurm), LOSS)
    assert reconcile("lad").campaigns[0].state == "paused"
    code, out, err = run_main(monkeypatch, capsys, "resume", "lad")  # the budget was not raised
    assert code == 5 and out == ""
    assert err.startswith("error: campaign 'lad' cannot pay for its next rung: promotion of 3 config(s) into "
                          "rung 1 would cost up to 1 GPU-h but only ")
    assert "resume --force to promote anyway" in err
    tick = reconcile("lad").campaigns[0]
    assert tick.state == "paused" and tick.decisions == [] and len(fake_slurm.jobs) == 1  # nothing was released

    code, out, _ = run_main(monkeypatch, capsys, "resume", "lad", "--force", "--reason", "rung 1 is worth it")
    assert code == 0 and out.startswith("lad: active; released nothing held (applied)\n"
                                        "the promotion into rung 1 may proceed, past the budget (promotion of 3")
    tick = reconcile("lad").campaigns[0]  # the next tick promotes: the person's decision is not held again
    assert sorted(d.task for d in tick.decisions if d.action == "promote") == [7, 9, 10]
    assert tick.state == "active" and len(fake_slurm.jobs) == 2
    store = Store.open()
    record = store.campaign("lad")
    assert record is not None
    release = DecisionLog(store.engine).entries(record.id, actions=("release",))[-1]
    assert release.inputs["promotion"]["forced"] is True and release.inputs["promotion"]["rung"] == 0
    assert release.reason.startswith("resumed by hand (rung 1 is worth it): 0 held element(s) released; "
                                     "the promotion into rung 1 may proceed, past the budget")
