"""A plain Python trainer that prints with `print()` (no flush, stdout a file) is seen while it
runs: its lines reach `output` and its metric points reach metrics.jsonl as they are printed,
each with its own time, because every attempt runs with PYTHONUNBUFFERED=1 unless the spec
says otherwise. Before, all points of a task got the time of its exit."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_real_cluster import cli

pytestmark = pytest.mark.slurm

TRAINER = """\
import time
for step in range(1, 7):
    print(f"step {step}: loss {1.0 / step:.4f}")
    time.sleep(3)
"""


def test_a_python_trainers_lines_and_points_arrive_while_it_runs(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # a user who never heard of it (the CI image sets it)
    (tmp_path / "train.py").write_text(TRAINER)
    submit(write_spec(tmp_path, """\
name: live
command: [python3, train.py]
resources: {mem: 200M, time: "00:05:00"}
metrics: {from_output: 'step (?P<step>\\d+): loss (?P<loss>[\\d.]+)'}
objective: {metric: loss, goal: min}
""", name="live.yaml"))
    attempt_dirs = tmp_path / "runs" / "live" / "tasks" / "0"
    deadline = time.monotonic() + 240
    seen_running = ""
    while time.monotonic() < deadline:
        out = cli("output", "live", "0")
        # read while it ran: its exit was not written when the read was over (the program prints
        # for 18 s, room for reads of several seconds each, as `output` takes on a loaded machine)
        if "step 2: loss" in out.stdout and not list(attempt_dirs.glob("*/exit.json")):
            seen_running = out.stdout
            break
        if list(attempt_dirs.glob("*/exit.json")):
            pytest.fail(f"the program ended before any read of its output saw it running:\n{out.stdout}")
        time.sleep(0.5)
    assert seen_running, "no line of the program reached its output while it ran"
    while not list(attempt_dirs.glob("*/exit.json")) and time.monotonic() < deadline:
        time.sleep(1)
    [metrics] = list(attempt_dirs.glob("*/metrics.jsonl"))
    points = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [p["step"] for p in points] == [1, 2, 3, 4, 5, 6]
    times = [p["t"] for p in points]
    assert times[-1] - times[0] > 10  # stamped as printed, 3 s apart, not all at exit
    while reconcile("live").campaigns[0].state != "finished" and time.monotonic() < deadline:
        time.sleep(1)
    ranked = cli("results", "live", "--json")
    assert ranked.returncode == 0, ranked.stderr  # the objective names the metric: no "names no objective"
    [row] = json.loads(ranked.stdout)["data"]["rows"]
    assert row["metric"] == "loss" and row["final"] == pytest.approx(1 / 6, abs=1e-4)
