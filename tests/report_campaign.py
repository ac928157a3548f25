"""A four-task campaign driven by reconcile through a simulated hour against the fake Slurm, with
telemetry and metrics files in its attempt directories: what the report tests draw.

The store's clock is moved tick by tick (`utc_now` patched), so attempts, observations and
decisions carry the hour's times; the run starts two hours ago, so nothing lies in the future.

  task 0  runs  +2 → +25 min, COMPLETED
  task 1  runs  +2 → +15 min, OUT_OF_MEMORY → resubmitted (attempt 2 runs +20 → +55 min, COMPLETED)
  task 2  waits, runs +10 → +40 min with its GPU mostly idle, COMPLETED
  task 3  waits, runs +30 → +50 min, FAILED with exit code 1 → given up
"""

from __future__ import annotations

import json
import math
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from campaignctl.adapters import decision_log, revision_rows, store, submission_rows
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm

NAME = "lr-report"
SPEC = f"""\
name: {NAME}
command: [python3, train.py, '{{lr}}']
matrix: {{lr: [0.1, 0.03, 0.01, 0.003]}}
resources: {{gpus: 1, cpus_per_task: 2, time: "01:00:00"}}
budget: {{gpu_hours: 4, warn_at: 0.5}}
"""


class Clock:
    """The store's notion of now, in epoch seconds, patched where rows get their timestamps."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, t0: float) -> None:
        self.t0, self.now = t0, t0
        stamp = lambda: datetime.fromtimestamp(self.now, timezone.utc).isoformat(timespec="seconds")  # noqa: E731
        for module in (store, decision_log, submission_rows, revision_rows):
            monkeypatch.setattr(module, "utc_now", stamp)

    def at(self, minutes: float) -> float:
        self.now = self.t0 + minutes * 60
        return self.now

    def sacct(self, minutes: float) -> str:
        """A time as sacct prints it under TZ=UTC (adapters/proc.py): UTC, no zone."""
        return datetime.fromtimestamp(self.t0 + minutes * 60, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _attempt_dir(run_dir: Path, task: int, attempt: int) -> Path:
    record = Store.open().campaign(NAME)
    assert record is not None
    token = next(a.token for a in Store.open().attempts(record.id)
                 if a.task_index == task and a.attempt_number == attempt)
    path = run_dir / "tasks" / str(task) / token
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_run(clock: Clock, run_dir: Path, task: int, attempt: int, minutes: tuple[float, float],
              gpu_pct: float, steps: tuple[int, int]) -> None:
    """Telemetry every 30 s and a loss every 50 steps over the attempt's run."""
    folder = _attempt_dir(run_dir, task, attempt)
    start, end = clock.t0 + minutes[0] * 60, clock.t0 + minutes[1] * 60
    lines = [json.dumps({"event": "start", "t": start, "interval_s": 30, "nvml": "ok", "gpus": [0]})]
    for k in range(int((end - start) // 30)):
        wave = math.sin(k / 5)
        lines.append(json.dumps({"t": start + 30 * k, "cpu_pct": 150 + 30 * wave, "rss_mb": 2000 + k, "nproc": 2,
                                 "gpus": [{"index": 0, "util_pct": gpu_pct + 8 * wave, "mem_used_mb": 9000.0}]}))
    (folder / "telemetry.jsonl").write_text("\n".join(lines) + "\n")
    span = steps[1] - steps[0]
    metrics = [{"step": s, "loss": round(2.5 * math.exp(-s / (400 + 300 * task)) + 0.2, 4),
                "t": start + (s - steps[0]) / span * (end - start)} for s in range(steps[0], steps[1] + 1, 50)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))


def tick(clock: Clock, minutes: float) -> None:
    reconcile(NAME, now=datetime.fromtimestamp(clock.at(minutes)))


def drive(tmp_path: Path, fake: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Submit and drive the campaign to finished; returns its run directory."""
    clock = Clock(monkeypatch, time.time() - 2 * 3600)
    submit(write_spec(tmp_path, SPEC))
    run_dir = tmp_path / "runs" / NAME
    [array] = [j.job_id for j in fake.live_jobs()]
    for i, state in enumerate(("RUNNING", "RUNNING", "PENDING", "PENDING")):
        fake.set_state(array, i, state, nodes="None assigned" if state == "PENDING" else "node1")
    tick(clock, 5)
    write_run(clock, run_dir, 0, 1, (2, 25), 85, (0, 1000))
    write_run(clock, run_dir, 1, 1, (2, 15), 80, (0, 250))
    fake.set_state(array, 0, "COMPLETED", end=clock.sacct(25), elapsed="00:23:00")
    fake.set_state(array, 1, "OUT_OF_MEMORY", "0:125", end=clock.sacct(15), elapsed="00:13:00")
    fake.set_state(array, 2, "RUNNING", elapsed="00:05:00")
    tick(clock, 16)  # task 1 resubmitted with more memory: a new array
    retry = max(fake.jobs, key=int)
    fake.set_state(retry, 0, "RUNNING", elapsed="00:01:00")
    fake.set_state(array, 3, "RUNNING", elapsed="00:01:00")
    tick(clock, 31)
    write_run(clock, run_dir, 2, 1, (10, 40), 18, (0, 1000))
    write_run(clock, run_dir, 3, 1, (30, 50), 75, (0, 400))
    write_run(clock, run_dir, 1, 2, (20, 55), 82, (200, 1000))
    fake.set_state(array, 2, "COMPLETED", end=clock.sacct(40), elapsed="00:30:00")
    fake.set_state(array, 3, "FAILED", "1:0", end=clock.sacct(50), elapsed="00:20:00")
    fake.set_state(retry, 0, "COMPLETED", end=clock.sacct(55), elapsed="00:35:00")
    tick(clock, 56)  # task 3 given up (exit 1 is a bug); the campaign is finished
    return run_dir


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking the signature and the chunk's CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    assert data[8:16] == b"\x00\x00\x00\x0dIHDR", "the first chunk is not a 13-byte IHDR"
    assert int.from_bytes(data[29:33], "big") == zlib.crc32(data[12:29]), "IHDR CRC mismatch"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
