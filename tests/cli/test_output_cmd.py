"""`campaignctl output NAME TASK`: the program's output of an attempt, whole, --tail, --path,
--attempt, -f until the attempt ends; exit 4 (with the range) for what does not exist, 6 while
there is no output yet, 130 on Ctrl-C, 141 with no traceback when the reader closes the pipe.
A give-up decision names the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from campaignctl.adapters.store import Store
from campaignctl.services import output as output_service
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, REPO, run_main, write_spec
from tests.fakeslurm import FakeSlurm

Run = tuple[int, str, str]


@pytest.fixture
def sweep(tmp_path: Path, fake_slurm: FakeSlurm) -> str:
    """Task 0 running; task 1 ran out of memory, was resubmitted, and the retry is pending."""
    submit(write_spec(tmp_path, """\
name: out
command: [python3, train.py, "{i}"]
matrix: {i: [0, 1]}
resources: {mem: 1G, time: "00:10:00"}
"""))
    (job,) = fake_slurm.jobs
    fake_slurm.jobs[job].held = False
    fake_slurm.set_state(job, 0, "RUNNING")
    fake_slurm.set_state(job, 1, "OUT_OF_MEMORY", "0:125")
    reconcile("out")
    retry = max(fake_slurm.jobs, key=int)
    fake_slurm.jobs[retry].held = False
    fake_slurm.set_state(retry, 0, "PENDING", nodes="")
    return "out"


def output_file(tmp_path: Path, task: int, attempt: int = -1) -> Path:
    store = Store.open()
    record = store.campaign("out")
    assert record is not None
    mine = [a for a in store.attempts(record.id) if a.task_index == task]
    path = tmp_path / "runs" / "out" / "tasks" / str(task) / mine[attempt].token / "output.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    return run_main(monkeypatch, capsys, "output", *args)


def test_prints_the_whole_output_and_bytes_that_are_not_utf8_do_not_crash(
        sweep: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    output_file(tmp_path, 0).write_bytes(b"epoch 1 loss 2.3\n\xff\xfe latin-1 caf\xe9\nValueError: boom\n")
    code, out, err = cli(monkeypatch, capsys, sweep, "0")
    assert code == 0, err
    assert out == "epoch 1 loss 2.3\n\ufffd\ufffd latin-1 caf\ufffd\nValueError: boom\n"
    assert "task 0 of 'out', attempt 1 of 1 (RUNNING, job 100_0)" in err  # on stderr: stdout is the file


def test_tail_path_and_attempt(sweep: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    first = output_file(tmp_path, 1, 0)
    first.write_text("".join(f"step {i}\n" for i in range(100)) + "Killed")
    code, out, _ = cli(monkeypatch, capsys, sweep, "1", "--attempt", "1", "--tail", "2")
    assert (code, out) == (0, "step 99\nKilled\n")  # the newline the program never wrote (issue 28)
    code, out, _ = cli(monkeypatch, capsys, sweep, "1", "--attempt", "1", "--path")
    assert (code, out) == (0, f"{first}\n")
    code, out, _ = cli(monkeypatch, capsys, sweep, "1", "--path")  # the latest attempt: the retry
    assert code == 0 and out != f"{first}\n" and out.endswith("/output.log\n") and "/tasks/1/" in out


def test_what_does_not_exist_exits_4_naming_what_does(sweep: str, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(monkeypatch, capsys, sweep, "7")
    assert code == 4 and "campaign 'out' has no task 7" in err and "its tasks are 0-1" in err
    code, _, err = cli(monkeypatch, capsys, sweep, "1", "--attempt", "3")
    assert code == 4 and "task 1 of 'out' has no attempt 3" in err and "its attempts are 1-2" in err
    code, _, err = cli(monkeypatch, capsys, "nope", "0")
    assert code == 4 and "no campaign named 'nope'" in err


def test_a_pending_attempt_has_no_output_yet_exit_6(sweep: str, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(monkeypatch, capsys, sweep, "1")
    assert code == 6 and out == ""
    assert "error: task 1 attempt 2 of 'out' has no output yet (" in err and "is written once the job starts" in err
    assert "hint: `campaignctl output out 1 -f` waits for it" in err


def test_follow_prints_what_is_appended_until_the_attempt_ends(
        sweep: str, tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    log = output_file(tmp_path, 0)
    log.write_text("epoch 1\n")
    monkeypatch.setattr(output_service, "STATE_EVERY_S", 0.0)
    asked = []

    def job_writes_then_ends() -> None:
        asked.append(1)
        if len(asked) == 2:
            with log.open("a") as handle:
                handle.write("epoch 2\nsaved checkpoint\n")
            fake_slurm.set_state("100", 0, "COMPLETED")

    fake_slurm.before_sacct = job_writes_then_ends
    code, out, err = cli(monkeypatch, capsys, sweep, "0", "-f")
    assert code == 0, err
    assert out == "epoch 1\nepoch 2\nsaved checkpoint\n"  # what the last read found after the end
    assert len(asked) == 2


def test_follow_waits_for_a_pending_attempt_and_ctrl_c_exits_130(
        sweep: str, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(output_service, "STATE_EVERY_S", 0.0)

    def interrupted() -> None:
        raise KeyboardInterrupt

    fake_slurm.before_sacct = interrupted
    code, out, err = cli(monkeypatch, capsys, sweep, "1", "-f")
    assert (code, out) == (130, "")
    assert "task 1 of 'out', attempt 2 of 2 (SUBMITTED, job 101_0)" in err  # as the last tick stored it


def test_a_reader_that_closes_the_pipe_gets_no_traceback(sweep: str, tmp_path: Path, state_home: Path) -> None:
    output_file(tmp_path, 0).write_text("".join(f"line {i} " + "x" * 80 + "\n" for i in range(200_000)))
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "CAMPAIGNCTL_FAULT")}
    env["XDG_STATE_HOME"] = str(state_home)
    head = subprocess.Popen([sys.executable, "-m", "campaignctl", "output", sweep, "0"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert head.stdout is not None and head.stderr is not None
    assert head.stdout.readline() == b"line 0 " + b"x" * 80 + b"\n"
    head.stdout.close()  # `| head -1`
    err = head.stderr.read().decode()
    assert head.wait(timeout=COMMAND_TIMEOUT_S) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err


def test_the_header_comes_first_and_a_last_line_without_newline_gets_one(
        sweep: str, tmp_path: Path, state_home: Path) -> None:
    """Issue 28: in a terminal (stdout and stderr on one screen) the header came after the output
    and glued onto a traceback's last line (`AssertionErrortask 2 of …`)."""
    output_file(tmp_path, 0).write_text("Traceback (most recent call last):\nAssertionError")
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "CAMPAIGNCTL_FAULT")}
    env["XDG_STATE_HOME"] = str(state_home)
    both = subprocess.run([sys.executable, "-m", "campaignctl", "output", sweep, "0"], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT_S)
    lines = both.stdout.splitlines(keepends=True)
    assert both.returncode == 0 and lines[0].startswith("task 0 of 'out', attempt 1 of 1")
    assert lines[1:] == ["Traceback (most recent call last):\n", "AssertionError\n"]
    quiet = subprocess.run([sys.executable, "-m", "campaignctl", "output", sweep, "0", "--quiet"], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert quiet.stderr == "" and quiet.stdout.endswith("AssertionError\n")


@pytest.mark.parametrize("fixture, said", [
    ("oom-22.05.out", ["[slurm] slurmstepd-node2: error: Detected 1 oom-kill event(s) in StepId=7200.0. Some of your "
                       "processes may have been killed by the cgroup out-of-memory handler.",
                       "[slurm] srun: error: node2: task 0: Out Of Memory"]),
    ("timeout-22.05.out", ["[slurm] slurmstepd-node1: error: *** STEP 7183.0 ON node1 CANCELLED AT "
                           "2026-11-27T18:04:40 DUE TO TIME LIMIT ***",
                           "[slurm] slurmstepd-node1: error: *** JOB 7183 ON node1 CANCELLED AT "
                           "2026-11-27T18:04:40 DUE TO TIME LIMIT ***"]),
])
def test_how_slurm_ended_the_attempt_follows_its_output(
        sweep: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        fixture: str, said: list[str]) -> None:
    """Issue 28: for an OOM attempt the log just stopped; the oom-kill line is in the job's own
    log under <run_dir>/slurm (recorded: tests/fixtures/slurm_logs/SOURCES.md)."""
    output_file(tmp_path, 1, 0).write_text("step 98\nstep 99\n")
    log = tmp_path / "runs" / "out" / "slurm" / "100_1_0_log.out"  # task 1's first attempt: job 100_1
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes((REPO / "tests" / "fixtures" / "slurm_logs" / fixture).read_bytes())
    code, out, _ = cli(monkeypatch, capsys, sweep, "1", "--attempt", "1")
    assert code == 0 and out.splitlines() == ["step 98", "step 99", *said]


def test_a_give_up_decision_names_the_output_file(tmp_path: Path, fake_slurm: FakeSlurm,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    submit(write_spec(tmp_path, "name: bug\ncommand: [python3, train.py]\ntasks: [{}]\n"))
    (job,) = fake_slurm.jobs
    fake_slurm.jobs[job].held = False
    fake_slurm.set_state(job, 0, "FAILED", "1:0")
    (decision,) = reconcile("bug").campaigns[0].decisions
    code, path, _ = run_main(monkeypatch, capsys, "output", "bug", "0", "--path")
    assert decision.action == "give_up" and code == 0
    assert decision.reason.endswith(f" Output: {path.strip()}")
    code, shown, _ = run_main(monkeypatch, capsys, "log", "bug", "--task", "0")
    assert code == 0 and f"Output:{path.strip()}" in "".join(shown.split())  # however the table wraps it


def test_secrets_the_program_printed_are_masked_even_when_cut_between_two_reads(
        sweep: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    output_file(tmp_path, 0).write_text("connecting with DB_PASS=hunter2 as ana\n"
                                        "curl -H 'Authorization: Bearer eyJhbGciOi' url\nepoch 1 loss 2.3\n")
    code, out, _ = cli(monkeypatch, capsys, sweep, "0")
    assert code == 0 and "hunter2" not in out and "eyJhbGciOi" not in out
    assert out == "connecting with DB_PASS=*** as ana\ncurl -H 'Authorization: Bearer ***' url\nepoch 1 loss 2.3\n"
    # a read that ends inside the secret: masked whole, once its line is complete
    assert "".join(output_service.masked(["login --password hun", "ter2 ok\nprogress 10%\rprogress 20%"])) == \
        "login --password *** ok\nprogress 10%\rprogress 20%"
