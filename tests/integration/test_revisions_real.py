"""A changed spec on the real cluster: growing a finished grid by one value runs exactly the new
task; a different experiment under the finished name is refused (exit 3) with what would happen
to each task, and nothing is recorded."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import history, ticking_until_finished

pytestmark = pytest.mark.slurm

GRID = """\
name: grow
command: [python3, -c, "print('lr', {lr})"]
matrix: {lr: [0.1, 0.01]}
resources: {mem: 100M, time: "00:05:00"}
"""


def test_a_finished_grid_grown_by_one_value_runs_exactly_the_new_task(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    first = cli("submit", str(write_spec(tmp_path, GRID)), "--json")
    assert first.returncode == 0, first.stderr
    ticking_until_finished("grow")

    grown = cli("submit", str(write_spec(tmp_path, GRID.replace("[0.1, 0.01]", "[0.1, 0.01, 0.001]"))), "--json")
    assert grown.returncode == 0, grown.stderr
    data = json.loads(grown.stdout)["data"]
    assert data["outcome"] == "revised" and [c["first_task"] for c in data["chunks"]] == [2]
    ticking_until_finished("grow")
    assert Counter(r.task_index for r in history("grow")) == {0: 1, 1: 1, 2: 1}
    assert {r.state for r in history("grow")} == {"COMPLETED"}
    assert "lr 0.001" in next((tmp_path / "runs" / "grow" / "tasks" / "2").glob("*/output.log")).read_text()

    other = GRID.replace("matrix: {lr: [0.1, 0.01]}", "tasks: [{lr: 3}]")
    refused = cli("submit", str(write_spec(tmp_path, other)))
    assert refused.returncode == 3, refused.stderr
    assert "task 0: lr=0.1 would become lr=3" in refused.stderr
    assert "task 2: no longer in the spec" in refused.stderr and "another `name:`" in refused.stderr
    revisions = json.loads(cli("revisions", "grow", "--json").stdout)["data"]
    assert len(revisions["revisions"]) == 2
