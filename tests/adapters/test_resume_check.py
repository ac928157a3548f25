"""`{resume?…}` decided by what is on disk when the attempt starts, run through run_task in this
process: a retry whose first attempt died before its first checkpoint starts over (timm's
`--resume` of a missing file exits "No checkpoint found"), a first attempt that finds a
checkpoint (an edited spec's `retry`) resumes, and a payload pickled before the rule keeps the
attempt-number rule."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from campaignctl.adapters.resume_check import as_started, checkpoint_present
from campaignctl.core.task_launch import TaskLaunch
from tests.adapters.test_task_env import run

SHOW = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'resume': os.environ.get('CAMPAIGNCTL_RESUME')}))"


def launch(tmp_path: Path, attempt: int = 2, check: str | None = "ckpt/last.pth.tar") -> TaskLaunch:
    fresh = (sys.executable, "-c", SHOW, "--epochs", "3")
    return TaskLaunch("c", 0, "tok.0", fresh, {"MODE": "fresh"}, str(tmp_path), str(tmp_path / "task"),
                      attempt_number=attempt, telemetry_interval_s=0, checkpoint_dir=str(tmp_path / "ckpt"),
                      resume_check=check, resume_argv=(*fresh, "--resume", str(tmp_path / "ckpt/last.pth.tar")),
                      resume_env={"MODE": "resumed"})


def seen(output: str) -> dict[str, object]:
    return json.loads(output.splitlines()[-1])


def test_a_retry_without_a_checkpoint_starts_over_and_says_so(tmp_path: Path, keep_signal_handlers: None) -> None:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "args.yaml").write_text("model: resnet18\n")  # timm writes this before epoch 1
    code, info, output = run(launch(tmp_path))
    assert code == 0 and info["resumed"] is False
    assert seen(output) == {"argv": ["--epochs", "3"], "resume": None}
    assert output.startswith(f"campaignctl: starting over: nothing at {tmp_path}/ckpt/last.pth.tar to resume from\n")


def test_an_attempt_that_finds_the_checkpoint_resumes_whatever_its_number(
        tmp_path: Path, keep_signal_handlers: None) -> None:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "last.pth.tar").write_bytes(b"\x80weights")
    code, info, output = run(launch(tmp_path, attempt=1))
    assert code == 0 and info["resumed"] is True
    assert seen(output) == {"argv": ["--epochs", "3", "--resume", f"{tmp_path}/ckpt/last.pth.tar"], "resume": "1"}
    assert output.startswith(f"campaignctl: resuming: {tmp_path}/ckpt/last.pth.tar is there\n")


def test_without_a_checkpoint_file_a_non_empty_checkpoint_directory_is_the_mark(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    assert as_started(launch(tmp_path, check="")).resumed is False  # made by an earlier attempt, empty
    (tmp_path / "ckpt" / "ckpt.pt").write_bytes(b"x")  # nanoGPT's, once validation improved
    started = as_started(launch(tmp_path, check=""))
    assert started.resumed is True and started.env == {"MODE": "resumed"}


@pytest.mark.parametrize(("made", "present"), [
    (None, False), (b"", False), (b"x", True), ("dir", False), ("dir+file", True)])
def test_what_counts_as_a_checkpoint(tmp_path: Path, made: bytes | str | None, present: bool) -> None:
    mark = tmp_path / "mark"
    if isinstance(made, bytes):
        mark.write_bytes(made)  # an empty file is a save cut short by the kill
    elif made:
        mark.mkdir()
        if made == "dir+file":
            (mark / "shard-0").write_bytes(b"x")
    assert checkpoint_present(mark) is present


def test_a_payload_pickled_before_the_rule_resumes_by_attempt_number(
        tmp_path: Path, keep_signal_handlers: None) -> None:
    old = launch(tmp_path, attempt=2, check=None)
    assert as_started(old) is old
    code, info, output = run(old)
    assert code == 0 and "resumed" not in info and not output.startswith("campaignctl:")
    assert seen(output) == {"argv": ["--epochs", "3"], "resume": "1"}


def test_a_resumed_attempt_s_step_less_metrics_continue_the_task_s_curve(
        tmp_path: Path, keep_signal_handlers: None) -> None:
    earlier = tmp_path / "task" / "old.0"
    earlier.mkdir(parents=True)
    (earlier / "metrics.jsonl").write_text('{"step": 6, "valid_loss": 6.1, "t": 1}\n'
                                           '{"step": 7, "valid_loss": 6.0, "t": 2}\n')
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "last.pth.tar").write_bytes(b"x")
    line = "| end of epoch   2 | time: 187.09s | valid loss  6.04 | valid ppl   418.07"  # word_language_model's
    program = (sys.executable, "-c", f"print({line!r})")
    resumed = dataclasses.replace(launch(tmp_path), argv=program, resume_argv=program,
                                  output_metrics=(r"valid loss +(?P<valid_loss>[\d.]+)",))
    run(resumed)
    points = [json.loads(p) for p in (tmp_path / "task" / "tok.0" / "metrics.jsonl").read_text().splitlines()]
    assert [(p["step"], p["valid_loss"]) for p in points] == [(8, 6.04)]  # not step 0: the curve goes on
    (tmp_path / "ckpt" / "last.pth.tar").unlink()  # an attempt that starts over starts its curve over
    (tmp_path / "task" / "tok.0" / "metrics.jsonl").unlink()
    run(resumed)
    again = [json.loads(p) for p in (tmp_path / "task" / "tok.0" / "metrics.jsonl").read_text().splitlines()]
    assert [p["step"] for p in again] == [0]
