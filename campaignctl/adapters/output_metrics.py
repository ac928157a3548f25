"""Job side of `metrics.from_output`: follow the program's output.log while it runs and append
each matching line's numbers to metrics.jsonl, the file a program would write itself
($CAMPAIGNCTL_METRICS), so reconcile ingests them like any other metric points.

A thread reads the bytes added since its last look every POLL_S seconds and once more after the
program ends; only complete lines are matched (a line ends at `\\n` or `\\r`: progress bars
redraw with `\\r`). The last unterminated line is matched at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from campaignctl.adapters.job_files import regular_file
from campaignctl.core.policy.output_causes import TAIL_BYTES
from campaignctl.core.task_launch import TaskLaunch
from campaignctl.core.tuning.output_metrics import MAX_LINE_CHARS, compile_patterns, record_of_line

POLL_S = 1.0
READ_CHUNK = 1 << 20


class OutputMetrics:
    def __init__(self, log_path: Path, metrics_path: Path, patterns: Sequence[str], offset: int,
                 poll_s: float = POLL_S, last_step: int = -1) -> None:
        self.log_path, self.metrics_path = log_path, metrics_path
        self.patterns = compile_patterns(patterns)
        self.offset, self.poll_s = offset, poll_s
        self.partial = b""
        self.points = 0
        self.last_step = last_step  # the step of the last point written: automatic steps follow it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="campaignctl-output-metrics", daemon=True)

    def start(self) -> OutputMetrics:
        self._thread.start()
        return self

    def stop(self) -> int:
        """Read what is left (the final unterminated line too); returns the points written."""
        self._stop.set()
        self._thread.join()
        self._read(final=True)
        return self.points

    def _follow(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._read(final=False)

    def _read(self, final: bool) -> None:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.offset)
                data = log.read(READ_CHUNK)
                while data:
                    self.offset += len(data)
                    self._lines(self.partial + data)
                    data = log.read(READ_CHUNK)
        except OSError:
            return
        if final and self.partial:
            self._write([self.partial])
            self.partial = b""

    def _lines(self, data: bytes) -> None:
        lines = data.replace(b"\r", b"\n").split(b"\n")
        self.partial = lines.pop()[-MAX_LINE_CHARS * 4:]
        self._write(lines)

    def _write(self, lines: Sequence[bytes]) -> None:
        now = time.time()
        records = []
        for line in lines:
            record = record_of_line(line.decode(errors="replace"), self.patterns, now, self.last_step) if line else None
            if record is not None:
                records.append(record)
                self.last_step = int(record["step"])
        if not records:
            return
        with open(self.metrics_path, "a", encoding="utf-8") as out:
            out.write("".join(json.dumps(r) + "\n" for r in records))
        self.points += len(records)


@contextlib.contextmanager
def metrics_from_output(launch: TaskLaunch, log_path: Path) -> Iterator[None]:
    """Follow what is appended to `log_path` from now (after the setup lines' output) while the
    block runs, when the spec has `metrics.from_output`; a launch pickled before it has none."""
    patterns = launch.output_metrics
    if not patterns:
        yield
        return
    follower = OutputMetrics(log_path, launch.paths.metrics, patterns, log_path.stat().st_size,
                             last_step=last_step_before(launch) if launch.resumed else -1).start()
    try:
        yield
    finally:
        follower.stop()


def last_step_before(launch: TaskLaunch) -> int:
    """The highest step the task's earlier attempts recorded (-1: none): a resumed attempt's
    step-less lines (timm's eval line, word_language_model's final one) continue the task's curve
    instead of starting it again at 0. The last TAIL_BYTES of each earlier metrics.jsonl."""
    last = -1
    for other in Path(launch.task_dir).glob(f"*/{launch.paths.metrics.name}"):
        if other.parent.name == launch.attempt_token:
            continue
        with contextlib.suppress(OSError), regular_file(other) as handle:  # the group's directory: no FIFO
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_BYTES))
            for line in handle.read(TAIL_BYTES).splitlines():
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    last = max(last, int(json.loads(line)["step"]))
    return last
