"""`status NAME` as people read it: 80 columns by default, --wide at 210, one line per task, the
facts readable (task, state, elapsed as `38m`, attempts, the enforced decision), quiet states
collapsed, filters, the control loop's health in the header, and the stored state when Slurm
does not answer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from campaignctl.cli import app
from campaignctl.services.cron import install
from campaignctl.services.reconcile import reconcile
from campaignctl.services.revisions import set_policy
from campaignctl.services.submit import submit
from tests.adapters.test_ladder_fake_slurm import LOSS, finish_rung, ladder_spec, newest_array
from tests.cli.test_cron import Cron
from tests.conftest import COMMAND_TIMEOUT_S, write_spec
from tests.fakeslurm import FakeSlurm

BUSY = "sacct: error: Problem talking to the database: Connection refused"
DATASET = "/datasets/imagenet/train-shards-0000-of-1024"


def shown(width: int, *args: str) -> Result:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(width))
        done = CliRunner().invoke(app, ["status", *args])
    assert done.exit_code == 0, done.output
    assert "Traceback" not in done.output
    if "--wide" in args:  # whole rows whatever the width (issue 28): nothing cut
        assert "…" not in done.output, done.output
        return done
    too_wide = [line for line in done.output.splitlines() if len(line) > width]
    assert not too_wide, too_wide
    return done


def task_lines(output: str) -> list[str]:
    """The table's lines: a task index, then a state in capitals (compact) or the params (--wide)."""
    return [line for line in output.splitlines() if re.match(r"\s*\d+ ([A-Z_]+|\w+=)", line)]


def row_of(output: str, task: int) -> str:
    (line,) = [line for line in task_lines(output) if line.split()[0] == str(task)]
    return line


@pytest.fixture
def sweep(tmp_path: Path, fake_slurm: FakeSlurm) -> str:
    """6 tasks: 0 running for 38 min, 1 failed (exit 1: given up), 2 out of memory (resubmitted)."""
    submit(write_spec(tmp_path, f"""\
name: lay
command: [python3, train.py, "{{lr}}", "{{batch}}", "{{data}}"]
matrix: {{lr: [0.0003, 0.001, 0.01], batch: [32, 64], data: ["{DATASET}"]}}
resources: {{mem: 1G, time: "01:00:00"}}
"""))
    (job,) = fake_slurm.jobs
    fake_slurm.jobs[job].held = False
    fake_slurm.set_state(job, 0, "RUNNING", elapsed="00:38:00")
    fake_slurm.set_state(job, 1, "FAILED", "1:0", elapsed="00:00:02")
    fake_slurm.set_state(job, 2, "OUT_OF_MEMORY", "0:125", elapsed="00:01:10")
    reconcile("lay")
    return "lay"


def test_status_fits_80_columns_one_line_per_task(sweep: str) -> None:
    out = shown(80, sweep).output
    assert out.startswith("lay: revision 1, active · last tick ")
    running, failed, oom = row_of(out, 0), row_of(out, 1), row_of(out, 2)
    assert running.split()[:6] == ["0", "RUNNING", "1", "38m", "-", "lr=0.0003"]  # no exit while it runs
    assert failed.split()[:5] == ["1", "FAILED", "1", "2s", "1"] and "give_up (failed)" in failed
    assert oom.split()[:3] == ["2", "COMPLETED", "2"] and "resubmit (out_of_memory)" in oom  # the retry
    assert "batch=64" in failed and DATASET not in out  # only the parameters that tell tasks apart
    assert len(task_lines(out)) == 6
    # the summary comes before the table: a --watch taller than the terminal cuts the table's tail
    assert out.index("6 tasks (") < out.index("task state")


def test_wide_shows_every_field_at_210_columns(sweep: str) -> None:
    out = shown(210, sweep, "--wide").output
    header = next(line for line in out.splitlines() if line.startswith("task"))
    assert header.split()[:4] == ["task", "params", "state", "try"]
    for column in ("job id", "node", "elapsed", "exit", "cpu", "mem", "time", "gpu mem", "GPU-h", "kWh", "decision",
                   "shadow proposal",
                   "attempt token"):
        assert column in header
    failed = row_of(out, 1)
    assert f"data={DATASET[:18]}" in failed and "100_1" in failed and "node1" in failed  # all parameters
    assert "give_up (failed) applied" in failed


def test_filters_by_state_and_task(sweep: str) -> None:
    out = shown(80, sweep, "--state", "failed", "--state", "RUNNING").output
    assert [line.split()[0] for line in task_lines(out)] == ["0", "1"]
    assert "6 tasks (" in out  # the summary still counts the campaign
    out = shown(80, sweep, "--task", "2").output
    assert [line.split()[0] for line in task_lines(out)] == ["2"]
    assert "no task matches" in shown(80, sweep, "--state", "TIMEOUT").output


def test_a_task_that_does_not_exist_exits_4_with_the_range(sweep: str, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import run_main
    code, _, err = run_main(monkeypatch, capsys, "status", sweep, "--task", "9")
    assert code == 4 and "campaign 'lay' has no task 9" in err and "its tasks are 0-5" in err


def test_the_header_says_when_no_crontab_line_runs_reconcile(sweep: str) -> None:
    """Once a minute at most, on one line (issue 28: 3 lines on every screen)."""
    from campaignctl.services import ticks
    first = shown(80, sweep).output
    warned = [line for line in first.splitlines() if "crontab" in line]
    assert len(warned) == 1 and len(warned[0]) <= 80, warned
    assert warned[0].startswith("no crontab line runs `campaignctl reconcile`")
    assert "campaignctl cron install" in warned[0] or "crontab: command not found" in warned[0]
    assert "crontab" not in shown(80, sweep).output  # again within the minute: not repeated
    stamp = next(Path(ticks.paths.state_path()).glob("warned-no-cron"))
    os.utime(stamp, (time.time() - ticks.WARN_EVERY_S - 1,) * 2)
    assert "no crontab line" in shown(80, sweep).output


def test_with_slurm_unreachable_it_shows_the_stored_state_marked_stale(
        sweep: str, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    from campaignctl.adapters import proc
    fake_slurm.fail_always["sacct"] = BUSY
    before = fake_slurm.calls["sacct"]
    slept: list[float] = []
    sleep = proc.time.sleep
    monkeypatch.setattr(proc.time, "sleep", lambda s: (slept.append(s), sleep(s))[1])
    out = shown(80, sweep).output
    assert fake_slurm.calls["sacct"] - before == 2 and sum(slept) <= 1  # one retry, then the store
    flat = " ".join(out.split())
    assert "stale: Slurm unreachable (`sacct" in flat and "Problem talking to the database" in flat
    assert "showing state from 20" in flat and "UTC (last tick)" in flat
    assert row_of(out, 0).split()[:4] == ["0", "RUNNING", "1", "38m"]  # as the last tick stored it
    assert row_of(out, 1).split()[:5] == ["1", "FAILED", "1", "2s", "1"]


def test_a_progressive_campaign_collapses_tasks_not_promoted(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(ladder_spec(tmp_path))
    finish_rung(tmp_path, fake_slurm, newest_array(fake_slurm), LOSS)
    reconcile("lad")  # rung 0 keeps configs 1, 3, 4: tasks 6, 8, 11 are not promoted
    for index in range(3):
        fake_slurm.set_state(newest_array(fake_slurm), index, "RUNNING")
    out = shown(80, "lad").output
    assert [line.split()[0] for line in task_lines(out)] == [*map(str, range(6)), "7", "9", "10"]
    assert "NOT_PROMOTED: 3 task(s) (6,8,11)" in out and "NOT_SUBMITTED: 6 task(s) (12-17)" in out
    every = shown(80, "lad", "--state", "NOT_PROMOTED").output
    assert [line.split()[0] for line in task_lines(every)] == ["6", "8", "11"]


def test_the_row_shows_the_enforced_decision_not_a_shadow_proposal(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    """An enforced resubmit awaiting approval, and a candidate policy proposing give_up for the same
    attempt: the row says what will happen; --wide shows the proposal in its own column."""
    submit(write_spec(tmp_path, """\
name: gate
command: [python3, train.py, "{i}"]
matrix: {i: [0, 1]}
resources: {mem: 1G, time: "00:10:00"}
policy: {use: default, approval: {max_mem: 1200M, expire_after: 1h}}
"""))
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text("name: strict\nversion: 1\nrules: {out_of_memory: {action: give_up}}\n")
    set_policy("gate", candidate, shadow=True)
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 0, "OUT_OF_MEMORY", "0:125")
    reconcile("gate")
    row = row_of(shown(80, "gate").output, 0)
    assert "awaiting-approval: resubmit (out_of" in row and "give_up" not in row
    wide = row_of(shown(200, "gate", "--wide").output, 0)
    assert "resubmit (out_of_memory) awaiting-approval" in wide and "give_up (out_of_memory) proposed" in wide


def test_submit_and_status_say_whether_a_crontab_line_runs_reconcile(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cron").mkdir()
    cron = Cron(tmp_path / "cron")
    monkeypatch.setenv("PATH", f"{cron.bin}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_CRONTAB", str(cron.store))
    spec = "command: [python3, train.py]\ntasks: [{}]\n"
    first = submit(write_spec(tmp_path, f"name: nocron\n{spec}", name="a.yaml"))
    assert any(note.startswith("no crontab line runs `campaignctl reconcile`: failed tasks are retried")
               for note in first.notes)
    assert "no crontab line" in " ".join(shown(80, "nocron").output.split())
    install(5)
    assert not any("crontab" in note for note in submit(write_spec(tmp_path, f"name: cron\n{spec}",
                                                                   name="b.yaml")).notes)
    job = max(fake_slurm.jobs, key=int)
    fake_slurm.jobs[job].held = False
    fake_slurm.set_state(job, 0, "RUNNING")
    reconcile("cron")
    out = " ".join(shown(80, "cron").output.split())
    assert re.search(r"cron: revision 1, active · last tick \d+s ago, cron every 5m ", out)
    assert "crontab" not in out


def test_state_and_task_filters_need_a_campaign(state_home: Path) -> None:
    done = CliRunner().invoke(app, ["status", "--state", "FAILED"])
    assert done.exit_code == 2 and "--state and --task pick tasks of one campaign" in done.output


@pytest.mark.parametrize("wide", [False, True])
def test_piped_status_prints_whole_rows_with_no_width_limit(sweep: str, state_home: Path, tmp_path: Path,
                                                            wide: bool) -> None:
    """Issue 28: `status NAME --wide | cat` was cut at 80 columns (params and nodes dropped,
    `COMPLET…`); squeue, ps and kubectl print whole rows to a pipe, for grep and paste. The
    real CLI in a subprocess, stdout a pipe, no COLUMNS (a shell does not export it)."""
    from tests.conftest import REPO
    bare = tmp_path / "no-slurm"  # sacct missing: the stored state, marked stale (layout is the point)
    bare.mkdir()
    env = {"PATH": str(bare), "HOME": str(tmp_path), "XDG_STATE_HOME": str(state_home), "TERM": "xterm",
           **{k: v for k, v in os.environ.items() if k == "CAMPAIGNCTL_DB_URL"}}  # the PostgreSQL run's
    done = subprocess.run([sys.executable, "-m", "campaignctl", "status", sweep, *(["--wide"] if wide else [])],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    rows = task_lines(done.stdout)
    assert len(rows) == 6
    if wide:
        assert all(f"data={DATASET}" in row for row in rows)  # every parameter, whole
        assert any(len(row) > 200 for row in rows)


NAMES = ("nano-faulty-sweep-v2", "progressive-lr-search", "resnet50-imagenet-seeds", "tiny")


@pytest.fixture
def many(tmp_path: Path, fake_slurm: FakeSlurm) -> list[str]:
    """Four campaigns with long names (issue 28: `nano-faul…`, `progressi…` at 80 columns)."""
    for name in NAMES:
        submit(write_spec(tmp_path, f"name: {name}\ncommand: [python3, t.py, '{{i}}']\nmatrix: {{i: [0, 1, 2]}}\n",
                          f"{name}.yaml"))
    for job in fake_slurm.jobs:
        fake_slurm.set_state(job, 0, "COMPLETED", "0:0", "node1")
        fake_slurm.set_state(job, 1, "FAILED", "1:0", "node1")
    return list(NAMES)


@pytest.mark.parametrize("width", [80, 120, 200])
def test_the_campaign_list_keeps_every_name_whole_one_line_each(many: list[str], width: int) -> None:
    out = _list(width)
    lines = out.splitlines()
    for name in many:
        (row,) = [line for line in lines if line.startswith(name + " ")]  # whole, one line
        assert "…" not in row
    assert sum(1 for line in lines if line.split()[:1] and line.split()[0] in many) == len(many)


def _list(width: int) -> str:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(width))
        done = CliRunner().invoke(app, ["status"])
    assert done.exit_code == 0, done.output
    too_wide = [line for line in done.output.splitlines() if len(line) > width]
    assert not too_wide, too_wide
    return done.output


def test_the_parameters_that_vary_are_never_cut_at_80_columns(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    """Issue 28: `status NAME` printed `n_layer=1 n_embd=32 lr=0.00…`: the one that varies, cut."""
    submit(write_spec(tmp_path, """\
name: nano
command: [python3, train.py, "{n_layer}", "{n_embd}", "{lr}"]
tasks:
  - {n_layer: 12, n_embd: 768, lr: 0.000316, dropout: 0.1, batch: 12}
  - {n_layer: 24, n_embd: 1024, lr: 0.000125, dropout: 0.2, batch: 8}
"""))
    (job,) = fake_slurm.jobs
    fake_slurm.set_state(job, 0, "OUT_OF_MEMORY", "0:125", "node1")
    reconcile("nano")  # a resubmit decision, to make room for
    out = shown(80, "nano").output
    assert "n_layer=12 n_embd=768 lr=0.000316 dropout=0.1 batch=12" in out
    assert "n_layer=24 n_embd=1024 lr=0.000125 dropout=0.2 batch=8" in out
    wide = shown(200, "nano").output  # with room, every column stays
    assert "decision" in wide and "elapsed" in wide


def test_a_large_campaign_shows_a_page_of_rows_and_counts_every_task(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    """A screen of rows, not one line per task of a 10,000-task grid; the counts are of every task."""
    result = submit(write_spec(tmp_path, "name: big\ncommand: [python3, t.py, '{i}']\nmatrix: {i: "
                               f"{list(range(250))}}}\n"))
    for chunk in result.chunks:
        fake_slurm.finish(chunk.job_id or "")
    reconcile("big")
    paged = shown(80, "big")
    assert [int(line.split()[0]) for line in task_lines(paged.output)] == list(range(100))
    assert "250 tasks (COMPLETED 250)" in paged.output
    assert "the first 100 of 250 tasks: --limit 0 shows every one" in paged.output
    assert len(task_lines(shown(80, "big", "--limit", "0").output)) == 250
    assert len(task_lines(shown(80, "big", "--limit", "7").output)) == 7
    assert len(task_lines(shown(80, "big", "--state", "COMPLETED", "--limit", "20").output)) == 20
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "200")
        data = CliRunner().invoke(app, ["status", "big", "--json"]).output
    assert data.count('"index"') == 250  # scripts get every row unless they ask for a page
