"""A search on the real cluster, reconciled from a cron-like environment (`env -i`): TPE finds a
config of the toy trainer within 5 % of its known optimum and `policy replay` asks every trial
again alike; a trial whose node fails and one preempted are retried as the same trial and told
once; a budget hold stops asking and `resume` after a raise finishes the search."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.store import Store
from campaignctl.services.replay import replay_policy
from campaignctl.services.results import results
from tests.conftest import logged, write_spec
from tests.integration.test_job_env_real import cron_env, reconcile_from_cron
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import history, wait_for

pytestmark = pytest.mark.slurm
HERE = Path(__file__).parent
OPTIMUM = 1.0  # toy_trainer.py --dropout: 1 at lr 3e-3, width 96, dropout 0.1


def search_spec(tmp_path: Path, name: str, trials: int, parallel: int, steps: int = 3, extra: str = "",
                time: str = "00:05:00", cpus: int = 1) -> Path:
    (tmp_path / "toy_trainer.py").write_text((HERE / "toy_trainer.py").read_text())
    return write_spec(tmp_path, f"""\
name: {name}
command: [{sys.executable}, toy_trainer.py, "{{lr}}", "{{width}}", --dropout, "{{dropout}}", --steps, "{{steps}}",
          --gpu-mb, "100"]
resources: {{gpus: 1, cpus_per_task: {cpus}, mem: 200M, time: "{time}"}}
telemetry: {{interval: 0}}
search:
  sampler: tpe
  metric: val_loss
  trials: {trials}
  parallel: {parallel}
  seed: 1
  space:
    lr: {{loguniform: [1.0e-5, 1.0e-1]}}
    width: {{int: [16, 256]}}
    dropout: {{uniform: [0.0, 0.5]}}
    steps: {steps}
{extra}""", name=f"{name}.yaml")


def state_of(name: str) -> str:
    record = Store.open().campaign(name)
    assert record is not None
    return record.state


def tick_until(name: str, env: dict[str, str], done: object, what: str, timeout_s: float = 300) -> None:
    def ticked() -> bool:
        reconcile_from_cron(name, env)
        return bool(done())  # type: ignore[operator]
    wait_for(what, ticked, timeout_s)


def test_tpe_finds_a_config_within_5_percent_of_the_optimum_and_replay_asks_every_trial_alike(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    name = f"search-tpe-{uuid.uuid4().hex[:6]}"
    submitted = cli("submit", str(search_spec(tmp_path, name, trials=24, parallel=4)))
    assert submitted.returncode == 0, submitted.stderr
    assert "asked the first 4 trial(s), submitted as job" in submitted.stdout, submitted.stdout
    env = cron_env(state_home, slurm_conf)
    tick_until(name, env, lambda: state_of(name) == "finished", "the search to finish", 420)

    entries = logged(name)
    asks = [e for e in entries if e.action == "ask"]
    tells = [e for e in entries if e.action == "tell"]
    assert sorted(e.task_index for e in asks) == list(range(24))  # each trial asked once
    assert sorted(e.task_index for e in tells) == list(range(24))  # and told once
    assert all(e.params["state"] == "COMPLETE" for e in tells)
    values = {e.task_index: float(e.params["value"]) for e in tells}  # type: ignore[arg-type]
    best = min(values, key=values.__getitem__)
    assert values[best] <= OPTIMUM * 1.05, values
    # each trial ran with what was asked: the attempt's params are the ask's, its argv rendered from them
    rows = {r.task_index: r for r in history(name)}
    for ask in asks:
        ran = json.loads(rows[ask.task_index].params_json)
        assert {k: ran[k] for k in ask.params["params"]} == ask.params["params"]  # type: ignore[union-attr]
    shown = results(name)
    assert shown.configs[0].config == best and shown.configs[0].rank == 1

    replayed = replay_policy("default", name)
    assert replayed.identical and replayed.reproduced == replayed.actual_decisions >= 48, replayed.differences


def test_a_trial_whose_node_fails_and_one_preempted_are_retried_as_the_same_trial_and_told_once(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    name = f"search-chaos-{uuid.uuid4().hex[:6]}"
    spec = search_spec(tmp_path, name, trials=4, parallel=2, steps=25, cpus=2)  # a node each (2 CPUs a node)
    assert cli("submit", str(spec)).returncode == 0
    env = cron_env(state_home, slurm_conf)

    def both_running() -> bool:
        rows = history(name)
        return len(rows) == 2 and all(r.state == "RUNNING" and r.nodes for r in rows)
    tick_until(name, env, both_running, "the first two trials to run", 120)
    first, second = sorted(history(name), key=lambda r: r.task_index)
    proc.run(["scontrol", "update", f"NodeName={first.nodes}", "State=DOWN", "Reason=campaignctl-search-test"])
    proc.run(["sbatch", "-p", "high", "-w", second.nodes, "-c2", "--mem=100M", "-J", "preemptor",
              "-o", "/dev/null", "--wrap", "sleep 2"])
    tick_until(name, env, lambda: state_of(name) == "finished", "the search to finish", 420)

    rows = history(name)
    by_trial: dict[int, list] = {}
    for r in rows:
        by_trial.setdefault(r.task_index, []).append(r)
    assert [r.state for r in by_trial[0]] == ["NODE_FAIL", "COMPLETED"], by_trial[0]
    assert [r.state for r in by_trial[1]] == ["PREEMPTED", "COMPLETED"], by_trial[1]
    for trial in (0, 1):  # the retry is the same trial: the same sampled params
        assert by_trial[trial][0].params_json == by_trial[trial][1].params_json
    entries = logged(name)
    assert sorted(e.task_index for e in entries if e.action == "ask") == [0, 1, 2, 3]  # none asked in their place
    told = sorted(e.task_index for e in entries if e.action == "tell")
    assert told == [0, 1, 2, 3]
    resubmits = {e.task_index: e.rule for e in entries if e.action == "resubmit"}
    assert resubmits == {0: "node_fail", 1: "preempted"}


def test_a_budget_hold_stops_asking_and_the_search_finishes_after_a_raise_and_resume(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    steps = 20
    name = f"search-budget-{uuid.uuid4().hex[:6]}"
    # a trial at its 1-minute limit costs 1/60 GPU-h; two running commit 0.033. Each runs 20 s: a
    # tick must see both running at once, and a loaded machine's ticks come 10 s or more apart (CI
    # run 38, 22.05: trials of 8 s were never seen running together in 120 s)
    spec = search_spec(tmp_path, name, trials=6, parallel=2, steps=steps, time="00:01:00",
                       extra="budget: {gpu_hours: 1.0}\n")
    assert cli("submit", str(spec)).returncode == 0
    env = cron_env(state_home, slurm_conf)
    tick_until(name, env, lambda: sum(r.state == "RUNNING" for r in history(name)) == 2, "two trials to run", 120)
    search_spec(tmp_path, name, trials=6, parallel=2, steps=steps, time="00:01:00", extra="budget: {gpu_hours: 0.02}\n")
    assert cli("submit", str(spec)).returncode == 0  # the budget cut: revision 2
    tick_until(name, env, lambda: state_of(name) == "paused", "the budget hold", 60)
    asked_before = sum(e.action == "ask" for e in logged(name))
    tick_until(name, env, lambda: all(r.state == "COMPLETED" for r in history(name)), "the running trials to end", 120)
    reconcile_from_cron(name, env)
    entries = logged(name)
    assert sum(e.action == "ask" for e in entries) == asked_before  # held: nothing more asked
    assert sum(e.action == "tell" for e in entries) == asked_before  # ...but the ending trials were told
    assert state_of(name) == "paused"

    search_spec(tmp_path, name, trials=6, parallel=2, steps=steps, time="00:01:00", extra="budget: {gpu_hours: 1.0}\n")
    assert cli("submit", str(spec)).returncode == 0
    resumed = cli("resume", name, "--reason", "raised to 1 GPU-h")
    assert resumed.returncode == 0, resumed.stderr
    tick_until(name, env, lambda: state_of(name) == "finished", "the search to finish", 300)
    entries = logged(name)
    assert sorted(e.task_index for e in entries if e.action == "ask") == list(range(6))
    assert sorted(e.task_index for e in entries if e.action == "tell") == list(range(6))


def test_a_search_with_rungs_promotes_a_trial_as_soon_as_it_ranks_in_the_top_third_of_its_rung_so_far(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    name = f"search-asha-{uuid.uuid4().hex[:6]}"
    rungs = ("rungs:\n  - {name: screen, params: {steps: 2}, promote: {eta: 3}}\n"
             "  - {name: full, params: {steps: 5}}\n")
    spec = search_spec(tmp_path, name, trials=9, parallel=3, extra=rungs)
    assert cli("submit", str(spec)).returncode == 0
    env = cron_env(state_home, slurm_conf)
    tick_until(name, env, lambda: state_of(name) == "finished", "the search to finish", 420)

    entries = logged(name)
    asks = [e for e in entries if e.action == "ask"]
    promotes = [e for e in entries if e.action == "promote"]
    assert sorted(e.task_index for e in asks) == list(range(9))
    assert sorted(e.task_index for e in entries if e.action == "tell") == list(range(9))  # told at the screen rung
    promoted = sorted(int(e.params["config"]) for e in promotes)  # type: ignore[call-overload]
    assert len(promoted) >= 3 and all(e.task_index == 9 + int(e.params["config"]) for e in promotes)  # type: ignore[call-overload]
    # asynchronous: a trial went on to the full rung before the search had asked its last screening trial
    assert promotes[0].id < asks[-1].id, (promotes[0], asks[-1])
    rows = {r.task_index: r for r in history(name)}
    for e in promotes:  # the full rung ran the trial's own sampled params, with the rung's steps
        full = json.loads(rows[e.task_index].params_json)
        asked = next(a for a in asks if a.task_index == e.params["config"])
        assert full["steps"] == 5 and {k: full[k] for k in asked.params["params"]} == asked.params["params"]  # type: ignore[union-attr]
        assert rows[e.task_index].state == "COMPLETED"
    shown = results(name)
    assert shown.configs[0].rank == 1 and shown.configs[0].config in promoted
    assert replay_policy("default", name).identical


def _started_ended(job_id: str) -> tuple[datetime | None, datetime | None]:
    """sacct's Start and End of one array element (None until Slurm set it)."""
    line = proc.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "Start,End"]).stdout.strip().splitlines()
    start, _, end = (line[0] if line else "|").partition("|")
    def when(text: str) -> datetime | None:
        return datetime.fromisoformat(text) if text[:2].isdigit() else None  # Unknown, None
    return when(start), when(end)


def test_a_trial_asked_ahead_starts_the_moment_the_one_it_waits_for_ends_with_no_tick_between(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    """`ahead: 1` with one slot: the tick that sees trial 0 run asks trial 1 queued behind it
    (afterany). No tick runs until trial 1 has started: Slurm started it as trial 0 ended. Then
    the ticks finish the search, each trial asked and told once."""
    name = f"search-ahead-{uuid.uuid4().hex[:6]}"
    # 15 one-second steps: a tick must see trial 0 run (with 6, under CI's load, trial 0 ended before
    # a tick saw it running, and trial 1 was asked as a plain trial: nothing left to queue behind)
    assert cli("submit", str(search_spec(tmp_path, name, trials=3, parallel=1, steps=15,
                                         extra="  ahead: 1\n"))).returncode == 0
    env = cron_env(state_home, slurm_conf)

    def queued_behind() -> bool:
        return any(e.action == "ask" and e.task_index == 1 for e in logged(name))
    tick_until(name, env, queued_behind, "trial 1 to be asked ahead", 120)
    rows = {r.task_index: r for r in history(name)}
    ask = next(e for e in logged(name) if e.action == "ask" and e.task_index == 1)
    assert ask.params["after"] == rows[0].job_id and ask.params["after_trial"] == 0, ask.params
    assert f"queued behind trial 0 (job {rows[0].job_id})" in ask.reason

    def started_without_a_tick() -> bool:
        return _started_ended(str(history(name)[-1].job_id))[0] is not None
    wait_for("trial 1 to start with no tick", started_without_a_tick, 120)
    _, ended = _started_ended(str(rows[0].job_id))
    started, _ = _started_ended(str(next(r for r in history(name) if r.task_index == 1).job_id))
    assert ended is not None and started is not None and (started - ended).total_seconds() <= 5, (ended, started)

    tick_until(name, env, lambda: state_of(name) == "finished", "the search to finish", 240)
    entries = logged(name)
    assert sorted(e.task_index for e in entries if e.action == "ask") == [0, 1, 2]
    assert sorted(e.task_index for e in entries if e.action == "tell") == [0, 1, 2]
    assert all(r.state == "COMPLETED" for r in history(name))
