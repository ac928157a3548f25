"""The job side of a plain-process pack (adapters/inline_pack.py), run here as the element's
runner would run it, with real programs: no `srun` at all (none is on PATH), `processes` tasks
at a time, each with its own attempt files; a task over its memory or past its time is ended by
the runner with the cause the tick reads (core/packing/inline_fates.py), its neighbours untouched.
On the lab the same pack runs inside a real array element (tests/integration/test_inline_pack_real.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from campaignctl.adapters import inline_pack
from campaignctl.adapters.inline_pack import run_inline
from campaignctl.core.pack_plan import PackShape, plan_packs
from campaignctl.core.resources import Resources
from campaignctl.core.task_launch import TaskLaunch

# How long a task that should be ended early would run on its own: the bounds are half of it, so
# that a loaded machine (CI's unit suite runs at nice 10 beside the Slurm suites) stays far inside.
LONG_S = 600


@pytest.fixture(autouse=True)
def own_signals() -> Iterator[None]:
    """run_inline forwards the element's signals to its tasks: the test process gets its own back."""
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)}
    yield
    for sig, handler in kept.items():
        signal.signal(sig, handler)


def launch(tmp_path: Path, task: int, code: str) -> TaskLaunch:
    program = (sys.executable, "-c", f"import sys, time, os\n{code}")
    return TaskLaunch("c", task, f"tok{task}.{task}", program, {}, str(tmp_path), str(tmp_path / "tasks" / str(task)),
                      telemetry_interval_s=0)


def ended(tmp_path: Path, task: int) -> dict:
    return json.loads((tmp_path / "tasks" / str(task) / f"tok{task}.{task}" / "exit.json").read_text())


def test_tasks_run_as_plain_processes_two_at_a_time_each_with_its_own_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no srun here: none is called
    [pack] = plan_packs(list(range(5)), Resources(cpus_per_task=1, mem_mb=500), PackShape(5, processes=2))
    assert pack.processes == 2 and pack.allocation.mem_mb == 1000 and pack.allocation.time_min == 60 * 3
    launches = [launch(tmp_path, t, f"time.sleep(1); print('task {t}'); sys.exit({3 if t == 1 else 0})")
                for t in range(5)]
    assert run_inline(pack, launches) == 1
    assert {t: ended(tmp_path, t)["returncode"] for t in range(5)} == {0: 0, 1: 3, 2: 0, 3: 0, 4: 0}
    assert (tmp_path / "tasks" / "4" / "tok4.4" / "output.log").read_text().strip().endswith("task 4")
    spans = [(ended(tmp_path, t)["started_at"], ended(tmp_path, t)["ended_at"]) for t in range(5)]
    at_once = max(sum(s <= begin < e for s, e in spans) for begin, _ in spans)
    assert at_once == 2, spans  # two at a time: never more, and not one after another


def test_a_task_over_its_memory_is_killed_with_the_cause_and_its_neighbour_finishes(
        tmp_path: Path) -> None:
    [pack] = plan_packs([0, 1], Resources(mem_mb=100), PackShape(2, processes=2))
    hog = f"b = bytearray(400 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep({LONG_S})"
    assert run_inline(pack, [launch(tmp_path, 0, hog), launch(tmp_path, 1, "time.sleep(2)")]) == 1
    oom, fine = ended(tmp_path, 0), ended(tmp_path, 1)
    assert oom["returncode"] == -9 and oom["cause"] == "out_of_memory", oom
    assert "over its memory limit of 100 MB" in oom["evidence"] and oom["ended_at"] - oom["started_at"] < LONG_S / 2
    assert fine["returncode"] == 0


def test_a_task_past_its_time_gets_sigterm_then_sigkill_and_the_cause(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline_pack, "GRACE_S", 3.0)
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                                 "signal.signal(signal.SIGTERM, lambda *a: print('checkpoint', flush=True))\n"
                                 f"print('ready', flush=True)\ntime.sleep({LONG_S})"],
                                start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"  # its handler is in place
    code, cause = inline_pack._held_to_limits(stubborn, 1.5, 10_000, None, tmp_path / "stop.request")
    assert code == -9 and cause is not None and cause["cause"] == "time_limit"
    assert stubborn.stdout is not None and stubborn.stdout.read() == "checkpoint\n"  # SIGTERM came first


def test_sigterm_to_the_element_reaches_running_tasks_and_starts_no_more(tmp_path: Path) -> None:
    [pack] = plan_packs([0, 1, 2], Resources(mem_mb=500), PackShape(3, processes=1))
    ready = tmp_path / "ready"
    waits = (f"import signal\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\nopen({str(ready)!r}, 'w')\n"
             f"time.sleep({LONG_S})")

    def terminate_once_ready() -> None:  # as Slurm does at the element's time limit, or scancel
        while not ready.exists():
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_once_ready, daemon=True).start()
    started = time.monotonic()
    run_inline(pack, [launch(tmp_path, t, waits) for t in range(3)])
    assert time.monotonic() - started < LONG_S / 2  # not the task's own end
    assert ended(tmp_path, 0)["returncode"] == 143  # its own handler ran: it could have checkpointed
    assert not (tmp_path / "tasks" / "1").exists() and not (tmp_path / "tasks" / "2").exists()


def test_a_stop_request_ends_that_task_alone_with_the_cause_stopped(tmp_path: Path) -> None:
    from campaignctl.adapters.exit_status import request_stop
    [pack] = plan_packs([0, 1], Resources(mem_mb=500), PackShape(2, processes=2))
    ready = tmp_path / "ready"
    stopped = launch(tmp_path, 0, f"open({str(ready)!r}, 'w')\ntime.sleep({LONG_S})")
    assert not request_stop(str(tmp_path), 0, "tok0.0")  # its directory is not there yet: nothing to stop

    def stop_once_ready() -> None:  # as the tick's stop decision does (services/act.py)
        while not ready.exists():
            time.sleep(0.1)
        assert request_stop(str(tmp_path), 0, "tok0.0")

    threading.Thread(target=stop_once_ready, daemon=True).start()
    run_inline(pack, [stopped, launch(tmp_path, 1, "time.sleep(3)")])
    first, second = ended(tmp_path, 0), ended(tmp_path, 1)
    assert first["cause"] == "stopped" and first["returncode"] == -15
    assert first["ended_at"] - first["started_at"] < LONG_S / 2
    assert second["returncode"] == 0 and second["cause"] is None
