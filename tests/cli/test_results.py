"""`campaignctl results` on the four-task campaign of tests/report_campaign.py (driven through
reconcile against the fake Slurm): task 0 COMPLETED after 23 min, task 1 OUT_OF_MEMORY after 13 min
then COMPLETED after 35, task 2 COMPLETED after 30 with an idle GPU, task 3 FAILED after 20. Each
reports `loss = 2.5 exp(-step / (400 + 300 task)) + 0.2`, decreasing, up to step 1000 (task 3: 400)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path

import pytest

from campaignctl.core.base.errors import InputError
from campaignctl.core.screens.results import Objective
from campaignctl.services.reconcile import reconcile
from campaignctl.services.results import choose_metric
from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, run_main, write_spec
from tests.fakeslurm import FakeSlurm
from tests.report_campaign import NAME, drive

LIMIT_S = 3600  # the spec's time: 01:00:00


def loss(task: int, step: int) -> float:
    return round(2.5 * math.exp(-step / (400 + 300 * task)) + 0.2, 4)


@pytest.fixture
def driven(tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return drive(tmp_path, fake_slurm, monkeypatch)


def json_rows(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    code, out, err = run_main(monkeypatch, capsys, "results", NAME, "--json", *args)
    assert code == 0, err
    envelope = json.loads(out)
    assert envelope["command"] == "results" and envelope["ok"]
    data = envelope["data"]
    # issue 28: the goal and the campaign's efficiency the table shows are in the JSON too
    assert {"metric", "goal", "goal_source", "by", "winner", "efficiency"} <= set(data)
    assert data["winner"] == next((r["config"] for r in data["rows"] if r["rank"] == 1), None)
    return data["rows"]


def test_json_has_one_plain_row_per_config_the_winner_first(
        driven: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rows = json_rows(monkeypatch, capsys)
    assert [(r["rank"], r["config"], r["lr"], r["state"], r["attempts"]) for r in rows] == [
        (1, 0, 0.1, "COMPLETED", 1), (2, 1, 0.03, "COMPLETED", 2), (3, 2, 0.01, "COMPLETED", 1),
        (4, 3, 0.003, "FAILED", 1)]
    final = {r["config"]: r["final"] for r in rows}
    assert final == {0: loss(0, 1000), 1: loss(1, 1000), 2: loss(2, 1000), 3: loss(3, 400)}
    assert all(r["metric"] == "loss" and r["best"] == r["final"] for r in rows)  # decreasing: last is best
    # time: elapsed ÷ limit; GPU-hours of every attempt (task 1: 13 min OOM + 35 min retry on 1 GPU)
    assert {r["config"]: r["time_eff"] for r in rows} == pytest.approx(
        {0: 23 * 60 / LIMIT_S, 1: 35 * 60 / LIMIT_S, 2: 30 * 60 / LIMIT_S, 3: 20 * 60 / LIMIT_S}, abs=1e-4)
    assert rows[1]["gpu_hours"] == pytest.approx((13 + 35) / 60, abs=1e-4)
    by_config = {r["config"]: r for r in rows}
    assert by_config[2]["gpu_util"] < 0.3 < by_config[0]["gpu_util"]  # task 2's GPU idled (~18 %)
    assert 0.6 < by_config[0]["cpu_eff"] < 0.9  # ~150 % of one core on the 2 cores asked for
    assert by_config[0]["gpu_mem_eff"] is None  # NVML gave no memory total: unknown, not 0


def test_by_best_follows_the_goal(driven: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    rows = json_rows(monkeypatch, capsys, "--by", "best", "--goal", "max")
    # higher is better: each config's best is its first report (step 0, 2.7 for all), its last differs
    assert all(r["best"] == loss(0, 0) for r in rows)
    assert [r["config"] for r in rows] == [0, 1, 2, 3]  # a tie keeps config order
    last = json_rows(monkeypatch, capsys, "--by", "last", "--goal", "max")
    assert [r["config"] for r in last] == [3, 2, 1, 0]


def test_csv_is_a_header_and_one_line_per_config(driven: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(monkeypatch, capsys, "results", NAME, "--csv")
    assert code == 0
    table = list(csv.DictReader(io.StringIO(out)))
    assert [row["lr"] for row in table] == ["0.1", "0.03", "0.01", "0.003"]
    assert float(table[0]["final"]) == loss(0, 1000) and table[0]["gpu_mem_eff"] == ""  # unknown: empty
    assert list(table[0])[:3] == ["rank", "config", "lr"]


def test_the_table_names_the_winner_and_the_unit(driven: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main(monkeypatch, capsys, "results", NAME)
    assert code == 0
    assert "winner: config 0 (lr=0.1)" in out and "min (assumed; --goal max if higher is better)" in out
    assert "% of what Slurm allocated" in out
    header = next(line for line in out.splitlines() if line.startswith("rank"))
    # fits 80; no prices in the policy: no cost column of zeros (issue 28)
    assert header.split() == ["rank", "config", "lr", "state", "final", "best", "GPU-h"]
    rows = [line for line in out.splitlines() if line.split()[:1] in (["rank"], ["1"], ["2"], ["3"], ["4"])]
    assert len(rows) == 5 and all(len(line) <= 80 and "…" not in line for line in rows)
    monkeypatch.setenv("COLUMNS", "160")
    code, out, _ = run_main(monkeypatch, capsys, "results", NAME, "--wide")
    assert code == 0 and "18%" in out  # task 2's GPU utilisation


def test_top_shows_the_head_of_the_ranking_and_says_how_many_there_are(
        driven: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A table of 100,000 configs took 77 s to draw: it shows the top (100 by default); --csv and
    --json get every row unless --top is given."""
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = run_main(monkeypatch, capsys, "results", NAME, "--top", "2")
    assert code == 0
    ranked = [line.split()[:2] for line in out.splitlines() if line.split()[:1] in (["1"], ["2"], ["3"], ["4"])]
    assert ranked == [["1", "0"], ["2", "1"]]
    assert "the top 2 of 4 configs: --top 0 shows every one" in out
    assert "winner: config 0 (lr=0.1)" in out
    code, out, _ = run_main(monkeypatch, capsys, "results", NAME)
    assert code == 0 and "the top" not in out  # 4 configs fit the default page
    assert [r["config"] for r in json_rows(monkeypatch, capsys, "--top", "3")] == [0, 1, 2]
    code, out, _ = run_main(monkeypatch, capsys, "results", NAME, "--csv", "--top", "1")
    assert code == 0 and [row["config"] for row in csv.DictReader(io.StringIO(out))] == ["0"]
    assert len(json_rows(monkeypatch, capsys)) == 4 and len(json_rows(monkeypatch, capsys, "--top", "0")) == 4


def test_an_unknown_metric_exits_3_naming_the_known_ones(driven: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(monkeypatch, capsys, "results", NAME, "--metric", "val_loss")
    assert code == 3 and out == ""
    assert "no task reported a metric named 'val_loss'" in err and "known metrics: loss" in err


def test_an_unknown_campaign_exits_4(state_home: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(monkeypatch, capsys, "results", "nope", "--json")
    assert code == 4 and err == ""  # under --json the error is the document on stdout
    assert json.loads(out)["error"] == {"code": 4, "kind": "not_found", "message": "no campaign named 'nope'",
                                        "hint": "known campaigns: none yet"}


def test_csv_and_json_together_is_a_usage_error(state_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(monkeypatch, capsys, "results", NAME, "--csv", "--json")
    assert code == 2 and json.loads(out)["error"]["kind"] == "usage" and "--csv or --json" in out


@pytest.mark.parametrize(("asked", "objective", "reported", "chosen"), [
    (None, Objective("val_loss", "min", "rungs[0].promote"), ["loss", "val_loss"], "val_loss"),
    (None, Objective("val_loss", "min", "rungs[0].promote"), [], "val_loss"),  # nothing reported yet
    (None, None, ["acc"], "acc"),
    (None, None, [], None),
    ("acc", None, ["loss", "acc"], "acc"),
])
def test_which_metric(asked: str | None, objective: Objective | None, reported: list[str], chosen: str | None) -> None:
    assert choose_metric(asked, objective, reported) == chosen


def test_several_metrics_and_no_objective_must_be_chosen() -> None:
    with pytest.raises(InputError) as raised:
        choose_metric(None, None, ["loss", "acc"])
    assert raised.value.exit_code == 3 and "choose one with --metric: loss, acc" in raised.value.hint


def test_a_cpu_campaign_shows_no_gpu_columns(tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28: a CPU campaign's results had GPU-h and cost columns of zeros."""
    submit(write_spec(tmp_path, "name: cpu\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1]}\n"
                                "resources: {cpus_per_task: 2, mem: 1G, time: '00:10:00'}\n"))
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 0, "COMPLETED", "0:0", "node1")
    reconcile("cpu")
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_main(monkeypatch, capsys, "results", "cpu", "--wide")
    header = next(line for line in out.splitlines() if line.startswith("rank"))
    assert code == 0 and "cpu" in header.split() and "mem" in header.split()
    assert not {"gpu", "GPU-h", "cost"} & set(header.split()) and "gpu mem" not in header


def test_results_to_a_file_keep_every_value_whole(driven: Path, state_home: Path, tmp_path: Path) -> None:
    """Issue 28: `results --wide >file` showed lr as `0.…`: a file or pipe has no width limit."""
    import subprocess
    import sys

    from tests.conftest import REPO
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(state_home),
           **{k: v for k, v in os.environ.items() if k == "CAMPAIGNCTL_DB_URL"}}  # the PostgreSQL run's
    done = subprocess.run([sys.executable, "-m", "campaignctl", "results", NAME, "--wide"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout and " 0.003 " in done.stdout
    header = next(line for line in done.stdout.splitlines() if line.startswith("rank"))
    assert {"cpu", "mem", "time", "gpu", "GPU-h"} <= set(header.split())
