"""Efficiency in `status --json` and in the report's task table, one unit everywhere (a fraction of
what Slurm allocated), on the campaign of tests/report_campaign.py (task 0: 23 min of a 1 h limit,
~150 % of one core on 2 cores, its GPU ~85 % busy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_main
from tests.fakeslurm import FakeSlurm
from tests.report_campaign import NAME, drive


def test_status_json_gives_each_task_and_the_campaign_their_efficiency(
        tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    drive(tmp_path, fake_slurm, monkeypatch)
    code, out, _ = run_main(monkeypatch, capsys, "status", NAME, "--json")
    assert code == 0
    data = json.loads(out)["data"]
    task0 = data["tasks"][0]
    assert task0["efficiency"]["time"] == pytest.approx(23 / 60)
    assert 0.6 < task0["efficiency"]["cpu"] < 0.9 and task0["cpu_mean_pct"] > 100  # of 2 cores vs of one
    assert 0.8 < task0["efficiency"]["gpu_util"] < 0.95
    assert data["tasks"][1]["efficiency"]["gpu_hours"] == pytest.approx((13 + 35) / 60)
    campaign = data["campaigns"][0]["efficiency"]
    assert campaign["time"] == pytest.approx((23 + 13 + 35 + 30 + 20) / (5 * 60))
    assert campaign["gpu_hours"] == pytest.approx(sum(t["efficiency"]["gpu_hours"] for t in data["tasks"]))
    code, out, _ = run_main(monkeypatch, capsys, "status", NAME)
    assert "78% / 2045M / 87%" in out  # cpu as % of the 2 allocated cores, not 157 % of one


def test_the_report_task_table_carries_the_same_figures(
        tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    drive(tmp_path, fake_slurm, monkeypatch)
    code, _, err = run_main(monkeypatch, capsys, "report", NAME, "--out", str(tmp_path / "report"))
    assert code == 0, err
    page = (tmp_path / "report" / "index.html").read_text()
    tasks = page[page.index('<section id="tasks">'):]
    assert "<th>cpu</th><th>mem</th><th>time</th><th>gpu</th><th>gpu mem</th><th>GPU-h</th><th>cost</th>" in tasks
    assert "<td>lr=0.1</td><td>COMPLETED</td><td>1</td><td>78%</td>" in tasks
    assert "<td>efficiency</td><td>cpu 76%, mem" in page
