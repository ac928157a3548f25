"""Metric lines → points and curves; the `campaignctl.report` helper that writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import campaignctl
from campaignctl.core.model.training_metrics import (
    best_until,
    curves_by_task,
    final_value,
    median,
    parse_metric_lines,
)


def test_a_line_gives_one_point_per_named_number_and_bad_lines_are_counted() -> None:
    parsed = parse_metric_lines([
        '{"step": 10, "loss": 0.5, "acc": 0.8, "t": 1.5}',
        '{"step": 20, "loss": 0.4, "note": "text", "ok": true, "inf": 1e999}',  # only loss counts
        "not json",
        '{"loss": 0.3}',  # no step
        '{"step": -1, "loss": 0.3}',
        '{"step": 30}',  # a step with no metric
        "",
    ])
    assert [(p.step, p.name, p.value, p.t) for p in parsed.points] == [
        (10, "loss", 0.5, 1.5), (10, "acc", 0.8, 1.5), (20, "loss", 0.4, None)]
    assert parsed.bad_lines == 4


def test_curves_follow_report_order_and_a_retry_continues_its_task_curve() -> None:
    rows = [(0, 1, "loss", 0.9), (0, 2, "loss", 0.7), (0, 2, "acc", 0.5), (1, 1, "loss", 0.8),
            (0, 3, "loss", 0.6)]  # task 0's retry resumed at step 3
    curves = curves_by_task(rows, "loss")
    assert curves == {0: ((1, 0.9), (2, 0.7), (3, 0.6)), 1: ((1, 0.8),)}
    assert final_value(curves[0]) == 0.6
    assert best_until(curves[0], 2, "min") == 0.7
    assert best_until(curves[0], 2, "max") == 0.9
    assert best_until(curves[1], 0, "min") is None
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0, 2.0, 3.0]) == 2.5


def test_report_appends_one_json_line_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("CAMPAIGNCTL_METRICS", str(path))
    campaignctl.report(step=1, loss=0.5)
    campaignctl.report(step=2, loss=0.25, acc=1)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["step"], r["loss"]) for r in lines] == [(1, 0.5), (2, 0.25)]
    assert lines[1]["acc"] == 1.0 and isinstance(lines[1]["t"], float)
    points = parse_metric_lines(path.read_text().splitlines()).points
    assert [(p.step, p.name) for p in points] == [(1, "loss"), (2, "loss"), (2, "acc")]


def test_report_outside_campaignctl_does_nothing_and_bad_values_are_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAMPAIGNCTL_METRICS", raising=False)
    campaignctl.report(step=1, loss=0.5)  # no file anywhere, no error
    with pytest.raises(ValueError, match="finite"):
        campaignctl.report(step=1, loss=float("nan"))
    with pytest.raises(ValueError, match="step"):
        campaignctl.report(step=-2, loss=1.0)
    with pytest.raises(ValueError, match="at least one"):
        campaignctl.report(step=3)


def test_the_helper_imports_nothing_beyond_the_standard_library() -> None:
    import subprocess
    import sys
    code = ("import sys, campaignctl; heavy = {'typer', 'rich', 'sqlalchemy', 'submitit', 'yaml'}; "
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
