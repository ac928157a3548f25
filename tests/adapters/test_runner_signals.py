"""Slurm's `--signal=USR2@90` reaches a program that handles it and never kills one that does not
(a killed one read as FAILED 140 instead of TIMEOUT, so the timeout policy never ran)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from campaignctl.adapters.runner import run_task
from campaignctl.core.task_launch import TaskLaunch

HANDLES_USR2 = """
import signal, sys, time
got = []
signal.signal(signal.SIGUSR2, lambda *_: got.append(1))
open(sys.argv[1], "w").write("ready")
end = time.time() + 5
while not got and time.time() < end:
    time.sleep(0.05)
print("checkpointed on USR2" if got else "no USR2")
"""
IGNORES_USR2 = """
import sys, time
open(sys.argv[1], "w").write("ready")
time.sleep(1.5)
print("finished normally")
"""


def run_with_usr2(tmp_path: Path, program: str) -> tuple[str, dict[str, object]]:
    """run_task on `program`; SIGUSR2 is sent to the runner (as slurmstepd would) once it is ready."""
    ready = tmp_path / "ready"
    launch = TaskLaunch("c", 0, "tok.0", (sys.executable, "-c", program, str(ready)), {}, str(tmp_path),
                        str(tmp_path / "task"), telemetry_interval_s=0)

    def signal_when_ready() -> None:
        while not ready.exists():
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGUSR2)

    threading.Thread(target=signal_when_ready, daemon=True).start()
    with contextlib.suppress(SystemExit):
        run_task(launch)
    attempt = tmp_path / "task" / "tok.0"
    return (attempt / "output.log").read_text(), json.loads((attempt / "exit.json").read_text())


def test_a_program_with_a_usr2_handler_receives_it(tmp_path: Path, keep_signal_handlers: None) -> None:
    output, exit_info = run_with_usr2(tmp_path, HANDLES_USR2)
    assert "checkpointed on USR2" in output and exit_info["returncode"] == 0


def test_a_program_without_a_handler_is_not_killed_by_usr2(tmp_path: Path, keep_signal_handlers: None) -> None:
    output, exit_info = run_with_usr2(tmp_path, IGNORES_USR2)
    assert "finished normally" in output and exit_info["returncode"] == 0
