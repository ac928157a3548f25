"""A search against the fake Slurm, for what the probe of issue 40 found: trials asked in the tick
that also retries a trial keep their params in `results`; a revision that changes the space under
trials already asked does not stop the campaign's ticks. (The real-cluster run is
tests/integration/test_search_real.py.)"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from campaignctl.adapters import faults, telemetry_files
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.replay import replay_policy
from campaignctl.services.results import results
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm

POLICY = Path(__file__).parents[2] / "campaignctl" / "policies" / "default.yaml"
SPACE = """\
    lr: {loguniform: [1.0e-5, 1.0e-1]}
    width: {int: [16, 256]}
"""


def search_spec(tmp_path: Path, space: str = SPACE, sampler: str = "random", ahead: int = 0) -> Path:
    return write_spec(tmp_path, f"""\
name: hunt
command: [python3, train.py, --lr, "{{lr}}", --width, "{{width}}"]
resources: {{gpus: 1, mem: 500M, time: "00:10:00"}}
search:
  sampler: {sampler}
  metric: loss
  trials: 6
  parallel: 2
  ahead: {ahead}
  seed: 3
  space:
{space}""")


def report(tmp_path: Path, task: int, token: str, loss: float) -> None:
    path = tmp_path / "runs" / "hunt" / "tasks" / str(task) / token / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"step": 1, "loss": loss}) + "\n")


def live(fake: FakeSlurm) -> dict[int, tuple[str, int, str]]:
    """Task index → (job id, array index, attempt token) of its newest submitted attempt."""
    store = Store.open()
    record = store.campaign("hunt")
    assert record is not None
    return {a.task_index: (a.job_id.split("_")[0], a.array_index, a.token)
            for a in store.attempts(record.id) if a.job_id}


def test_trials_asked_in_the_tick_that_retries_a_trial_keep_their_params(tmp_path: Path, fake_slurm: FakeSlurm,
                                                                       state_home: Path) -> None:
    submit(search_spec(tmp_path))  # the first tick asks trials 0 and 1
    first = live(fake_slurm)
    assert sorted(first) == [0, 1]
    job0, index0, _ = first[0]
    job1, index1, token1 = first[1]
    fake_slurm.set_state(job0, index0, "PREEMPTED")  # retried as the same trial, alike
    report(tmp_path, 1, token1, 0.5)
    fake_slurm.set_state(job1, index1, "COMPLETED")  # told; its slot asks trial 2
    tick = reconcile("hunt").campaigns[0]
    actions = sorted((d.action, d.task) for d in tick.decisions)
    assert ("ask", 2) in actions and ("resubmit", 0) in actions and ("tell", 1) in actions
    assert len(fake_slurm.jobs) == 2  # the retry and the new trial share one array
    rows = {r["config"]: r for r in results("hunt").rows()}
    asked = Store.open().task_params(Store.open().campaign("hunt").id)  # type: ignore[union-attr]
    assert set(asked[2]) >= {"lr", "width"}, asked[2]  # lost when the ask shared the retry's array
    assert rows[2]["lr"] == asked[2]["lr"] and rows[0]["lr"] == asked[0]["lr"]


def test_a_revision_that_narrows_the_space_under_asked_trials_keeps_the_ticks_going(
        tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path) -> None:
    submit(search_spec(tmp_path, sampler="tpe"))
    first = live(fake_slurm)
    for task, (job, index, token) in first.items():
        report(tmp_path, task, token, 0.5 + task)
        fake_slurm.set_state(job, index, "COMPLETED")
    reconcile("hunt")  # tells 0 and 1, asks 2 and 3 over the first space
    narrow = "    lr: {loguniform: [0.5, 0.9]}\n    width: {int: [300, 400]}\n    opt: {categorical: [adam]}\n"
    submit(search_spec(tmp_path, narrow, sampler="tpe"))  # a new revision: every asked trial lies outside
    for task, (job, index, token) in live(fake_slurm).items():
        if task in (2, 3):
            report(tmp_path, task, token, 0.1)
            fake_slurm.set_state(job, index, "COMPLETED")
    tick = reconcile("hunt").campaigns[0]  # was: ValueError from Optuna, exit 75 on every tick
    asks = [d for d in tick.decisions if d.action == "ask"]
    assert [d.task for d in asks] == [4, 5]
    params = Store.open().task_params(Store.open().campaign("hunt").id)  # type: ignore[union-attr]
    for task in (4, 5):
        assert 0.5 <= float(params[task]["lr"]) <= 0.9 and 300 <= int(params[task]["width"]) <= 400  # type: ignore[arg-type]
        assert params[task]["opt"] == "adam"
    assert "4 of them with values outside today's space" in asks[0].reason


class Killed(BaseException):
    """A tick dying at a crash point (as `kill -9` there would: nothing after it runs)."""


def test_a_search_killed_mid_tick_replays_with_every_ask_and_tell_the_same(
        tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40's probe: after a kill -9 mid-tick, `policy replay` reported 22 changed asks while the
    live log was right."""
    submit(search_spec(tmp_path, sampler="tpe"))
    points = iter(["before_deciding", "", "after_decisions", "after_sbatch", "before_deciding", "before_outcome"])
    for _ in range(12):
        for task, (job, index, token) in live(fake_slurm).items():
            if fake_slurm.element(job, index).state in ("", "PENDING", "RUNNING"):
                report(tmp_path, task, token, 1.0 / (1 + task))
                fake_slurm.set_state(job, index, "COMPLETED")
        point = next(points, "")

        def die(name: str, point: str = point) -> None:
            if name == point:
                raise Killed(name)

        monkeypatch.setattr(faults, "crash_point", die)
        with contextlib.suppress(Killed):
            reconcile("hunt")
        monkeypatch.setattr(faults, "crash_point", lambda name: None)
    store = Store.open()
    record = store.campaign("hunt")
    assert record is not None and record.state == "finished"
    replayed = replay_policy(str(POLICY), "hunt")
    assert replayed.identical, [(d.kind, d.task_index, d.attempt_token, d.note) for d in replayed.differences]


def test_metrics_past_a_ticks_read_cap_are_read_on_and_the_trial_is_told_its_final_value(
        tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40's probe: lines written past the 4 MiB per-tick cap by a task that then ended were
    never read (the next tick reads only running or just-ended attempts): the search was told a
    stale value and `results` kept it. The cap is 2 KiB here, the file 6 KiB."""
    monkeypatch.setattr(telemetry_files, "MAX_READ", 2048)
    submit(search_spec(tmp_path))
    job, index, token = live(fake_slurm)[0]
    path = tmp_path / "runs" / "hunt" / "tasks" / "0" / token / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"step": s, "loss": 9.0 - s / 100}) + "\n" for s in range(150))
                    + json.dumps({"step": 150, "loss": 0.25}) + "\n")
    fake_slurm.set_state(job, index, "COMPLETED")
    told = []
    for _ in range(4):
        told += [d for d in reconcile("hunt").campaigns[0].decisions if d.action == "tell" and d.task == 0]
    assert len(told) == 1 and "final loss 0.25" in told[0].reason
    rows = {r["config"]: r for r in results("hunt").rows()}
    assert rows[0]["final"] == 0.25 and rows[0]["best"] == 0.25


def test_a_search_asks_ahead_so_a_slot_never_waits_for_a_tick(tmp_path: Path, fake_slurm: FakeSlurm,
                                                              state_home: Path) -> None:
    """`ahead: 2`: once both slots run, the tick asks two more trials, each queued behind a running
    one (`--dependency=afterany:<its element>`): Slurm starts it the moment that one ends. The next
    ask waits for a queued trial to start; at most `ahead` wait at once. (Real: test_search_real.py.)"""
    fake_slurm.states_default_pending = True
    submit(search_spec(tmp_path, ahead=2))
    first = live(fake_slurm)
    assert sorted(first) == [0, 1] and all(not fake_slurm.jobs[j].dependency for j, _, _ in first.values())
    for job, index, _ in first.values():
        fake_slurm.set_state(job, index, "RUNNING")
    asks = [d for d in reconcile("hunt").campaigns[0].decisions if d.action == "ask"]
    assert [d.task for d in asks] == [2, 3]
    now = live(fake_slurm)
    for trial, leader in ((2, 0), (3, 1)):
        element = f"{first[leader][0]}_{first[leader][1]}"
        assert fake_slurm.jobs[now[trial][0]].dependency == f"afterany:{element}"
        assert f"queued behind trial {leader} (job {element})" in asks[trial - 2].reason
    assert not [d for d in reconcile("hunt").campaigns[0].decisions if d.action == "ask"]  # two wait: enough
    job0, index0, token0 = first[0]
    report(tmp_path, 0, token0, 0.5)
    fake_slurm.set_state(job0, index0, "COMPLETED")
    fake_slurm.set_state(now[2][0], now[2][1], "RUNNING")  # what afterany does the moment trial 0 ends
    decisions = reconcile("hunt").campaigns[0].decisions
    assert [(d.action, d.task) for d in decisions if d.action in ("tell", "ask")] == [("tell", 0), ("ask", 4)]
    assert fake_slurm.jobs[live(fake_slurm)[4][0]].dependency == f"afterany:{now[2][0]}_{now[2][1]}"
