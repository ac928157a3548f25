"""run_task in this process: the captured environment as the base, setup lines (an exported bash
function among them), a failing setup line's exit.json, metrics read from output lines, and the
captured file's modes."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import stat
import sys
from pathlib import Path

import pytest

from campaignctl.adapters.env_capture import PRIVATE_DIR, read_captured_env, write_captured_env
from campaignctl.adapters.runner import run_task
from campaignctl.adapters.task_env import base_environment
from campaignctl.core.task_launch import LAUNCH_VERSION, TaskLaunch, current_launch

PRINT_ENV = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))"
# an exported function as Lmod exports `module` (BASH_FUNC_<name>%%)
GREET = {"BASH_FUNC_greet%%": "() {  echo \"hello from $1\"; export GREETED=$1\n}"}


def launch_in(tmp_path: Path, env_file: str = "", setup: tuple[str, ...] = (),
              argv: tuple[str, ...] | None = None, **fields: object) -> TaskLaunch:
    argv = argv or (sys.executable, "-c", PRINT_ENV, str(tmp_path / "seen.json"))
    return TaskLaunch("c", 0, "tok.0", argv, {"FROM_SPEC": "1"}, str(tmp_path), str(tmp_path / "task"),
                      telemetry_interval_s=0, env_file=env_file, setup=setup, **fields)  # type: ignore[arg-type]


def run(launch: TaskLaunch) -> tuple[int, dict[str, object], str]:
    code = 0
    try:
        run_task(launch)
    except SystemExit as exc:
        code = int(exc.code or 0)
    attempt = Path(launch.task_dir) / "tok.0"
    return code, json.loads((attempt / "exit.json").read_text()), (attempt / "output.log").read_text()


@pytest.fixture
def captured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The submitter's environment, captured; the live one (cron's) lacks all of it."""
    submitter = {"PATH": f"/opt/extra/bin:{os.environ['PATH']}", "HOME": str(tmp_path), "MARKER": "m-123", **GREET}
    monkeypatch.setenv("LIVE_ONLY", "from-cron")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.delenv("MARKER", raising=False)
    return write_captured_env(str(tmp_path / "run"), "c", submitter)


def test_the_program_runs_on_the_captured_environment_not_the_live_one(
        tmp_path: Path, captured: str, keep_signal_handlers: None) -> None:
    code, info, _ = run(launch_in(tmp_path, captured))
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert code == 0 and info["cause"] is None and info["evidence"] == ""
    assert seen["MARKER"] == "m-123" and seen["PATH"].startswith("/opt/extra/bin:")
    assert seen["SLURM_JOB_ID"] == "4242" and seen["FROM_SPEC"] == "1" and seen["CAMPAIGNCTL_ATTEMPT"] == "1"
    assert "LIVE_ONLY" not in seen


def test_setup_lines_shape_the_programs_environment_and_exported_functions_work(
        tmp_path: Path, captured: str, keep_signal_handlers: None) -> None:
    setup = ("greet setup", "export FROM_SETUP=yes", "export PATH=/opt/setup/bin:$PATH", "cd /")
    code, _, output = run(launch_in(tmp_path, captured, setup))
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert code == 0
    assert "campaignctl setup [1/4]: greet setup\nhello from setup\n" in output
    assert seen["GREETED"] == "setup" and seen["FROM_SETUP"] == "yes"
    assert seen["PATH"].startswith("/opt/setup/bin:/opt/extra/bin:")
    # still exported to the program (bash re-prints the body in its own layout)
    assert seen["BASH_FUNC_greet%%"].startswith("() {") and 'echo "hello from $1"' in seen["BASH_FUNC_greet%%"]
    assert not {"_", "SHLVL", "PWD", "OLDPWD"} & set(seen)  # bash's bookkeeping, not the captured shell's


def test_a_failing_setup_line_fails_the_attempt_with_its_line_and_output(
        tmp_path: Path, captured: str, keep_signal_handlers: None) -> None:
    lmod = "Lmod has detected the following error: module cuda/99 not found"
    setup = ("echo first line ok", f"echo '{lmod}' >&2; false", "echo never")
    code, info, output = run(launch_in(tmp_path, captured, setup))
    assert code == 1 and info["returncode"] == 1 and info["cause"] == "setup_failed"
    assert info["evidence"] == f"setup line 2 `echo '{lmod}' >&2; false` exited 1:\n{lmod}"
    assert "never" not in output and not (tmp_path / "seen.json").exists()  # the program did not run


def test_a_secret_in_a_failing_setup_line_or_its_output_is_masked_in_the_evidence(
        tmp_path: Path, captured: str, keep_signal_handlers: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The evidence becomes the give-up reason: the log, every webhook body and the report."""
    monkeypatch.setenv("WANDB_API_KEY", "wb-0123456789")
    setup = ("export DB_PASSWORD=hunter2-long; echo using $DB_PASSWORD and $WANDB_API_KEY; false",)
    code, info, _ = run(launch_in(tmp_path, "", setup))
    assert code == 1 and info["cause"] == "setup_failed"
    assert "hunter2" not in str(info["evidence"]) and "wb-0123456789" not in str(info["evidence"])
    assert str(info["evidence"]).startswith("setup line 1 `export DB_PASSWORD=***; echo using")
    assert str(info["evidence"]).endswith("using *** and ***")


def test_a_setup_line_that_ends_the_shell_is_a_setup_failure(
        tmp_path: Path, captured: str, keep_signal_handlers: None) -> None:
    code, info, _ = run(launch_in(tmp_path, captured, ("set -e", "echo going; exit 0", "echo never")))
    assert code == 1 and info["cause"] == "setup_failed"
    assert str(info["evidence"]).startswith("setup line 2 `echo going; exit 0` ended the setup shell (exit status 0)")
    assert not (tmp_path / "seen.json").exists()


def test_an_unreadable_captured_environment_fails_before_the_program(
        tmp_path: Path, keep_signal_handlers: None) -> None:
    code, info, _ = run(launch_in(tmp_path, str(tmp_path / "missing")))
    assert code == 1 and info["cause"] == "setup_failed"
    assert "cannot be read on this node: No such file or directory" in str(info["evidence"])
    assert not (tmp_path / "seen.json").exists()


def test_a_payload_pickled_before_these_fields_keeps_the_live_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launch = launch_in(tmp_path)
    # an older campaignctl's TaskLaunch ended before `env_file`: its pickle holds the fields up to
    # there, which unpickling sets on today's class in order (dataclass __setstate__)
    names = [f.name for f in dataclasses.fields(TaskLaunch)]
    older = launch.__getstate__()[:names.index("env_file")]  # type: ignore[attr-defined]
    unpickled = TaskLaunch.__new__(TaskLaunch)
    unpickled.__setstate__(older)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        unpickled.env_file  # noqa: B018  (a slotted dataclass unpickles only the fields it had)
    current = current_launch(unpickled)
    assert (current.env_file, current.from_node, current.setup, current.resume_check, current.version) == (
        "", (), (), None, LAUNCH_VERSION)
    assert current.argv == launch.argv and current.env == launch.env
    monkeypatch.setenv("LIVE_ONLY", "x")
    env = base_environment(current, os.environ)
    assert env["LIVE_ONLY"] == "x" and env["FROM_SPEC"] == "1"


def test_the_captured_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = Path(write_captured_env(str(tmp_path / "run"), "c", {"SECRET": "v"}))
    finally:
        os.umask(old)
    assert path.parent == tmp_path / "run" / PRIVATE_DIR
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_captured_env(str(path)) == {"SECRET": "v"}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


NANOGPT = """
import sys, time
print("tokens per iteration will be: 16,384", flush=True)
for step, (train, val) in enumerate([(4.2874, 4.2823), (1.9705, 2.0664)]):
    print(f"step {step * 250}: train loss {train:.4f}, val loss {val:.4f}", flush=True)
    print(f"iter {step * 250}: loss {train:.4f}, time 103.54ms, mfu {-100.0:.2f}%", flush=True)
    time.sleep(1.2)
sys.stdout.write("step 500: train loss 1.5435, val loss 1.7256")  # no final newline
"""


def test_output_lines_become_metric_points_while_the_program_runs(
        tmp_path: Path, keep_signal_handlers: None) -> None:
    patterns = (r"step (?P<step>\d+): train loss (?P<train_loss>[-\d.]+), val loss (?P<val_loss>[-\d.]+)",)
    launch = launch_in(tmp_path, argv=(sys.executable, "-c", NANOGPT), output_metrics=patterns,
                       setup=("echo 'step 9: train loss 0, val loss 0'",))
    code, _, _ = run(launch)
    lines = (tmp_path / "task" / "tok.0" / "metrics.jsonl").read_text().splitlines()
    points = [{k: v for k, v in json.loads(line).items() if k != "t"} for line in lines]
    assert code == 0
    assert points == [{"step": 0, "train_loss": 4.2874, "val_loss": 4.2823},
                      {"step": 250, "train_loss": 1.9705, "val_loss": 2.0664},
                      {"step": 500, "train_loss": 1.5435, "val_loss": 1.7256}]  # setup output not read


def test_the_evidence_stays_under_4_kib_and_keeps_the_last_output_lines(
        tmp_path: Path, captured: str, keep_signal_handlers: None) -> None:
    noisy = "for i in $(seq 1 100); do printf 'line %03d %0200d\\n' $i 0; done; false # " + "x" * 2000
    _, info, _ = run(launch_in(tmp_path, captured, (noisy,)))
    evidence = str(info["evidence"])
    assert info["cause"] == "setup_failed" and len(evidence.encode()) <= 4096
    assert evidence.startswith("setup line 1 `for i in") and "…` exited 1:\n" in evidence
    assert evidence.rstrip().endswith("line 100 " + "0" * 200)


def test_a_payload_pickled_before_task_launch_moved_to_core_still_loads(tmp_path: Path) -> None:
    """Pending jobs submitted by an earlier release hold pickles that name
    `campaignctl.adapters.runner.TaskLaunch`; after an upgrade they must still start."""
    launch = launch_in(tmp_path)
    data = pickle.dumps(launch, protocol=2)  # GLOBAL names the class as "module\nname\n"; no frames
    assert b"campaignctl.core.task_launch\nTaskLaunch\n" in data
    old = data.replace(b"campaignctl.core.task_launch\n", b"campaignctl.adapters.runner\n")
    loaded = pickle.loads(old)
    assert loaded == launch and type(loaded) is TaskLaunch
