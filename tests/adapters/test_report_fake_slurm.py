"""`report` over a campaign reconcile drove against the fake Slurm: files, charts with data, honest
notes where there is none, the store's strings escaped, no Slurm call, matplotlib only when drawing."""

from __future__ import annotations

import base64
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from campaignctl.core.base.errors import NotFoundError, OutputError
from campaignctl.services.report import report
from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, REPO, write_spec
from tests.fakeslurm import FakeSlurm
from tests.report_campaign import NAME, drive, png_size

CHARTS = ("chart-gantt", "chart-utilisation", "chart-spend", "chart-metrics", "chart-decisions")


def test_a_driven_campaign_has_every_chart_with_data(tmp_path: Path, fake_slurm: FakeSlurm,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    drive(tmp_path, fake_slurm, monkeypatch)
    calls = sum(fake_slurm.calls.values())
    result = report(NAME, tmp_path / "out")
    assert sum(fake_slurm.calls.values()) == calls  # the store and the run directory only
    assert result.charts == {chart: "" for chart in CHARTS} and result.metric == "loss"
    page = (tmp_path / "out" / "index.html").read_text()
    for chart in CHARTS:
        file = re.search(rf'<figure id="{chart}" class="chart" data-file="([^"]+)">', page)
        assert file, chart
        png = (tmp_path / "out" / file[1]).read_bytes()
        width, height = png_size(png)
        assert width >= 800 and height >= 200 and len(png) > 10_000
        assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in page  # the same image, inline
        assert stat.S_IMODE((tmp_path / "out" / file[1]).stat().st_mode) == 0o644
    assert "tasks</td><td>4: COMPLETED 3, FAILED 1" in page
    assert "out_of_memory" in page and "lr=0.003" in page
    # issue 28: a results section, the winner first, before the task table
    results = re.search(r'<section id="results"><h2>([^<]+)</h2>(.*?)</section>', page)
    assert results and results[1] == "Results by the last loss (min): winner: config 0 (lr=0.1)"
    first = re.search(r"<tr><td>1</td><td>0</td><td>0.1</td><td>COMPLETED</td>", results[2])
    assert first and page.index('id="results"') < page.index('id="tasks"')
    assert result.files == [str(tmp_path / "out" / f) for f in ("index.html", "gantt.png", "utilisation.png",
                                                                "spend.png", "metrics.png", "decisions.png")]


def test_a_campaign_with_nothing_but_queued_jobs_renders_with_notes(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, "name: bare\ncommand: [python3, t.py, '{x}']\nmatrix: {x: ['<b>x</b>', \"a&b\"]}\n"))
    result = report("bare", tmp_path / "new" / "dir")  # the directory is created
    assert result.charts["chart-gantt"] == ""  # two queued attempts: waiting bars up to now
    assert "no telemetry samples" in result.charts["chart-utilisation"]
    assert "nothing spent, no budget" in result.charts["chart-spend"]
    assert "no training metrics" in result.charts["chart-metrics"]
    assert result.charts["chart-decisions"] == ""  # the first array's start decision
    page = Path(result.page).read_text()
    assert page.count('class="no-data"') == 3
    assert "x=&lt;b&gt;x&lt;/b&gt;" in page and "x=a&amp;b" in page and "<b>x</b>" not in page
    for file in result.files[1:]:
        assert png_size(Path(file).read_bytes())[0] > 0


def test_a_metric_nobody_reported_is_named_with_the_ones_that_were(tmp_path: Path, fake_slurm: FakeSlurm,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    drive(tmp_path, fake_slurm, monkeypatch)
    result = report(NAME, tmp_path / "out", metric="val_acc")
    assert result.charts["chart-metrics"] == "no task reported 'val_acc'; reported: loss"


def test_telemetry_files_gone_falls_back_to_what_reconcile_kept(tmp_path: Path, fake_slurm: FakeSlurm,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = drive(tmp_path, fake_slurm, monkeypatch)
    for path in run_dir.rglob("telemetry.jsonl"):
        path.unlink()
    result = report(NAME, tmp_path / "out")
    assert result.charts["chart-utilisation"] == ""
    assert "Samples of 0 attempt(s) from their telemetry.jsonl, of 5 from the last samples" in \
        Path(result.page).read_text()


def test_unknown_campaign_and_unwritable_output(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    with pytest.raises(NotFoundError, match="no campaign named 'nope'"):
        report("nope", tmp_path / "out")
    submit(write_spec(tmp_path, "name: one\ncommand: [python3, t.py]\n"))
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="cannot write the report to"):
        report("one", tmp_path / "file")
    assert not list(tmp_path.glob(".*.tmp*"))


def test_matplotlib_is_loaded_only_to_draw() -> None:
    code = ("import sys, campaignctl.cli, campaignctl.services.reconcile, campaignctl.services.report; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'numpy')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          timeout=COMMAND_TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_metric_legends_name_the_parameters_that_vary(tmp_path: Path, fake_slurm: FakeSlurm,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: the metrics chart's legend said `task 16`; it says what tells the lines apart."""
    from campaignctl.adapters import charts
    from campaignctl.services.report_charts import task_labels
    assert task_labels({0: {"lr": 0.1, "data": "/d"}, 1: {"lr": 0.01, "data": "/d"}}) == {0: "lr=0.1", 1: "lr=0.01"}
    drive(tmp_path, fake_slurm, monkeypatch)
    drawn: list[dict[int, str]] = []
    real = charts.metrics_png
    monkeypatch.setattr(charts, "metrics_png", lambda rungs, metric, labels=None: (
        drawn.append(dict(labels or {})), real(rungs, metric, labels))[1])
    report(NAME, tmp_path / "out")
    (labels,) = drawn
    assert labels[0] == "lr=0.1" and labels[3] == "lr=0.003"


def test_the_gantt_has_rows_only_for_tasks_that_reached_slurm(tmp_path: Path, fake_slurm: FakeSlurm,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: a progressive campaign's Gantt had empty rows for its later rungs' tasks."""
    from campaignctl.adapters import charts
    from tests.adapters.test_ladder_fake_slurm import ladder_spec
    submit(ladder_spec(tmp_path))  # 6 configs × 3 rungs: only rung 0's 6 tasks are submitted
    rows: list[list[int]] = []
    real = charts.gantt_png
    monkeypatch.setattr(charts, "gantt_png", lambda bars, tasks, window: (rows.append(list(tasks)),
                                                                          real(bars, tasks, window))[1])
    report("lad", tmp_path / "out")
    assert rows == [[0, 1, 2, 3, 4, 5]]


def test_a_cpu_campaign_utilisation_chart_has_no_empty_gpu_panel(tmp_path: Path, fake_slurm: FakeSlurm,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: half the utilisation chart was an empty GPU panel for a CPU campaign."""
    from campaignctl.adapters import charts
    from campaignctl.services.reconcile import reconcile
    submit(write_spec(tmp_path, "name: cpu\ncommand: [python3, t.py]\nresources: {cpus_per_task: 2, mem: 1G}\n"))
    (job,) = fake_slurm.jobs
    fake_slurm.set_state(job, 0, "RUNNING", "0:0", "node1")
    from campaignctl.adapters.store import Store
    record = Store.open().campaign("cpu")
    assert record is not None
    token = Store.open().attempts(record.id)[0].token
    sampled = tmp_path / "runs" / "cpu" / "tasks" / "0" / token / "telemetry.jsonl"
    sampled.parent.mkdir(parents=True)
    sampled.write_text("".join(f'{{"t": {1.7e9 + 10 * i}, "cpu_pct": 150, "rss_mb": 300, "nproc": 1}}\n'
                               for i in range(5)))
    reconcile("cpu")
    panels: list[bool] = []
    real = charts.utilisation_png
    monkeypatch.setattr(charts, "utilisation_png", lambda util, window, gpus=True: (panels.append(gpus),
                                                                                   real(util, window, gpus))[1])
    result = report("cpu", tmp_path / "out")
    assert result.charts["chart-utilisation"] == "" and panels == [False]
