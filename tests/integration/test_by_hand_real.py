"""On the real cluster: a spec Slurm would refuse, or whose workdir is missing, leaves nothing
behind and the corrected spec just runs; `cancel` and `retry` from the command line, with every
tick run from a cron-like environment (`env -i`)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.integration.test_job_env_real import cron_env, reconcile_from_cron
from tests.integration.test_real_cluster import cli, own_jobs_named

pytestmark = pytest.mark.slurm
HERE = Path(__file__).parent


def spec(tmp_path: Path, name: str, modes: list[str], resources: str = "", workdir: str = ".") -> Path:
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    tasks = ", ".join(f"{{mode: {m}}}" for m in modes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""\
name: {name}
workdir: {workdir}
command: [python3, {tmp_path / "chaos.py"}, "{{mode}}", "1"]
tasks: [{tasks}]
resources: {{cpus_per_task: 2, mem: 200M, time: "00:10:00"{resources}}}
""")
    return path


def task_states(name: str) -> dict[int, tuple[str, int]]:
    """Each task's (state, attempts) as `status --json` reports them."""
    done = cli("status", name, "--json")
    assert done.returncode in (0, 1), done.stderr
    return {t["index"]: (t["state"], t["attempts"]) for t in json.loads(done.stdout)["data"]["tasks"]}


def campaign_state(name: str) -> str:
    return str(json.loads(cli("status", name, "--json").stdout)["data"]["campaigns"][0]["state"])


def tick_until(name: str, env: dict[str, str], done: object, what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        reconcile_from_cron(name, env)
        if done():  # type: ignore[operator]
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}: {task_states(name)}")
        time.sleep(2)


def test_a_spec_slurm_refuses_leaves_nothing_and_the_corrected_spec_runs(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    wrong = cli("submit", str(spec(tmp_path, "mistaken", ["ok", "ok"], ", partition: gpux")))
    assert wrong.returncode == 3, wrong.stdout + wrong.stderr
    assert "Invalid partition name specified" in wrong.stderr and "nothing was submitted or recorded" in wrong.stderr
    missing = cli("submit", str(spec(tmp_path, "mistaken", ["ok", "ok"], workdir=str(tmp_path / "nope"))))
    assert missing.returncode == 3 and f"workdir: {tmp_path / 'nope'} is not a directory" in missing.stderr
    assert cli("status", "mistaken").returncode == 4  # no campaign was recorded
    assert own_jobs_named("mistaken") == []
    fixed = cli("submit", str(spec(tmp_path, "mistaken", ["ok", "ok"])))
    assert fixed.returncode == 0, fixed.stderr
    tick_until("mistaken", cron_env(state_home, slurm_conf), lambda: campaign_state("mistaken") == "finished",
               "the corrected campaign to finish")
    assert task_states("mistaken") == {0: ("COMPLETED", 1), 1: ("COMPLETED", 1)}


def test_cancel_then_retry_from_the_command_line(slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    env = cron_env(state_home, slurm_conf)
    name = "byhand"
    assert cli("submit", str(spec(tmp_path, name, ["slow", "slow", "bug"]))).returncode == 0

    def slow_ones_running() -> bool:
        states = task_states(name)
        return (all(states[t][0] == "RUNNING" for t in (0, 1))
                and all((tmp_path / "runs" / name / "tasks" / str(t) / "checkpoint" / "step").exists() for t in (0, 1))
                and states[2][0] == "FAILED")
    tick_until(name, env, slow_ones_running, "the slow tasks to run and the bug to be given up")

    one = cli("cancel", name, "--task", "0", "--reason", "looks diverged")
    assert one.returncode == 0, one.stderr
    assert "task 0: stop (applied)" in one.stdout
    tick_until(name, env, lambda: task_states(name)[0][0] == "CANCELLED", "task 0 to end CANCELLED")
    reconcile_from_cron(name, env)
    assert task_states(name)[0] == ("CANCELLED", 1)  # answered by the stop: never retried by the policy

    whole = cli("cancel", name, "--json")
    assert whole.returncode == 0, whole.stderr
    data = json.loads(whole.stdout)["data"]
    assert data["state"] == "cancelling"
    assert [(d["task"], d["action"]) for d in data["decisions"]] == [(1, "stop")]
    tick_until(name, env, lambda: campaign_state(name) == "cancelled", "the campaign to be cancelled")
    tick_until(name, env, lambda: own_jobs_named(name) == [], "squeue to forget the cancelled job (COMPLETING)")

    again = cli("retry", name, "--state", "CANCELLED", "--reason", "resume both")
    assert again.returncode == 0, again.stderr
    assert "task 0: retry (applied)" in again.stdout and "task 1: retry (applied)" in again.stdout
    tick_until(name, env, lambda: campaign_state(name) == "finished", "the retried tasks to finish")
    states = task_states(name)
    assert states[0] == ("COMPLETED", 2) and states[1] == ("COMPLETED", 2) and states[2] == ("FAILED", 1)
    for t in (0, 1):  # the retry resumed from the checkpoint the cancelled attempt wrote
        logs = [p.read_text() for p in (tmp_path / "runs" / name / "tasks" / str(t)).glob("*/output.log")]
        assert any("resumed from checkpoint: True" in text for text in logs)
    log = json.loads(cli("log", "show", name, "--json").stdout)["data"]
    manual = sorted((e["task_index"], e["action"]) for e in log if e["rule"] == "manual")
    assert manual == [(0, "retry"), (0, "stop"), (1, "retry"), (1, "stop")]
