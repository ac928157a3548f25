"""What a job, or a member of a shared campaign's group, can put in an attempt directory never
stops a tick: each repro of the reliability probe (issue 26) once made every tick exit 1 or hang.
`reconcile --all` reaches every campaign, and one whose part of the tick fails anyway (here by
fault injection) is reported in `status` and exit 75 while the others tick."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.cli import app
from campaignctl.services import reconcile as reconcile_module
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm

SPEC = "name: {name}\ncommand: [python3, t.py]\nmatrix: {{i: [0]}}\n"
HUGE = "9" * 309
DEEP = "[" * 200_000 + "]" * 200_000
HOSTILE_LINES = {
    "telemetry.jsonl": [f'{{"t": 1.7e9, "cpu_pct": 50, "rss_mb": {HUGE}}}', DEEP,
                        '{"t": 1.7e9, "cpu_pct": NaN, "rss_mb": 10}', '{"t": 1e400, "cpu_pct": 1, "rss_mb": 1}'],
    "metrics.jsonl": [f'{{"step": {HUGE}, "loss": 1}}', f'{{"step": 1, "loss": {HUGE}}}', DEEP],
}


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A FIFO once held the tick for ever: fail the test instead."""
    def late(_sig: int, _frame: object) -> None:
        raise TimeoutError("the tick hung on a file in the attempt directory")
    old = signal.signal(signal.SIGALRM, late)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _attempt_dir(tmp_path: Path, name: str) -> Path:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    token = store.attempts(record.id)[-1].token
    path = tmp_path / "runs" / name / "tasks" / "0" / token
    path.mkdir(parents=True, exist_ok=True)
    return path


def _two_campaigns(tmp_path: Path, fake_slurm: FakeSlurm) -> tuple[str, str]:
    """`bad` is running; `good` failed and the default policy resubmits it."""
    submit(write_spec(tmp_path, SPEC.format(name="bad"), "bad.yaml"))
    submit(write_spec(tmp_path, SPEC.format(name="good"), "good.yaml"))
    bad, good = sorted(fake_slurm.jobs, key=int)
    fake_slurm.set_state(bad, 0, "RUNNING", "0:0", "node1")
    fake_slurm.set_state(good, 0, "NODE_FAIL", "0:0", "node2")
    return bad, good


def _good_resubmitted(runner: CliRunner) -> bool:
    shown = json.loads(runner.invoke(app, ["status", "good", "--json"]).stdout)["data"]
    return shown["campaigns"][0]["attempts"] == 2


@pytest.mark.parametrize("kind", ["lines", "fifo", "directory", "symlink"])
def test_a_hostile_file_in_one_attempt_directory_stops_no_tick(tmp_path: Path, fake_slurm: FakeSlurm,
                                                               kind: str) -> None:
    _two_campaigns(tmp_path, fake_slurm)
    where = _attempt_dir(tmp_path, "bad")
    secret = tmp_path / "private.txt"
    secret.write_text('{"step": 1, "loss": 0.5}\n')
    for name in ("telemetry.jsonl", "metrics.jsonl", "exit.json", "output.log"):
        path = where / name
        if kind == "lines":
            path.write_text("\n".join(HOSTILE_LINES.get(name, [DEEP])) + "\n")
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "directory":
            path.mkdir()
        else:
            path.symlink_to(secret)
    runner = CliRunner()
    result = runner.invoke(app, ["reconcile", "--all"])
    assert result.exit_code == 0, result.output
    assert _good_resubmitted(runner)
    store = Store.open()
    record = store.campaign("bad")
    assert record is not None
    assert MetricsStore(store.engine).rows(record.id) == []  # nothing read through the symlink either
    if kind == "lines":
        summary = TelemetryStore(store.engine).by_task(record.id)[0]
        assert summary.bad_lines == 4 and summary.samples == 0
    assert runner.invoke(app, ["status", "bad"]).exit_code == 0


def test_output_of_a_hostile_output_log_is_a_clear_error(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    _two_campaigns(tmp_path, fake_slurm)
    where = _attempt_dir(tmp_path, "bad")
    unreadable = tmp_path / "unreadable.log"
    unreadable.write_text("x\n")
    unreadable.chmod(0)
    (where / "output.log").symlink_to(unreadable)
    result = CliRunner().invoke(app, ["output", "bad", "0"])
    assert result.exit_code == 3, result.output
    assert "is a symlink, not the file the runner writes" in result.output
    (where / "output.log").unlink()
    os.mkfifo(where / "output.log")
    result = CliRunner().invoke(app, ["output", "bad", "0", "--tail", "5"])
    assert result.exit_code == 3 and "is a FIFO" in result.output


def test_a_campaign_whose_tick_fails_is_reported_and_the_others_still_tick(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    _two_campaigns(tmp_path, fake_slurm)
    real_ingest = reconcile_module.ingest

    def broken(store: Store, tick_id: int, campaign_id: int, run_dir: str, *args: object) -> object:
        if run_dir.endswith("/bad"):
            raise OverflowError("int too large to convert to float")
        return real_ingest(store, tick_id, campaign_id, run_dir, *args)  # type: ignore[arg-type]
    monkeypatch.setattr(reconcile_module, "ingest", broken)
    runner = CliRunner()
    result = runner.invoke(app, ["reconcile", "--all"])
    assert result.exit_code == 75, result.output
    assert "bad failed this tick: internal error: OverflowError" in result.output
    assert _good_resubmitted(runner)
    shown = runner.invoke(app, ["status"]).stdout
    assert "bad: the last tick" in shown and "OverflowError" in shown
    monkeypatch.setattr(reconcile_module, "ingest", real_ingest)
    assert runner.invoke(app, ["reconcile", "--all"]).exit_code == 0
    assert "the last tick" not in runner.invoke(app, ["status"]).stdout  # gone once a tick went through
