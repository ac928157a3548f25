"""Job side of a plain-process pack (`pack: {per_job: K, processes: M}`): one array element runs
its K tasks as plain processes, M at a time, in the order they were packed. No `srun` per task,
so no step to create and no accounting row: Slurm sees one job. Each task runs through the
runner's own attempt code (adapters/runner.py run_attempt): its attempt directory, output,
telemetry, metrics and exit.json, as if it had a job of its own; the tick reads its fate from
those files (core/packing/inline_fates.py).

Limits, without a step's cgroup per task:
- time: a task's own `time`, from its start. At the limit its process group gets SIGTERM (the
  program may checkpoint) and SIGKILL GRACE_S later; exit.json names the cause `time_limit`,
  read as TIMEOUT.
- memory: the element's cgroup holds the M running tasks together (M × the task's `mem`). Each
  task's own share is held by polling its process tree's RSS every POLL_S: over it, SIGKILL and
  the cause `out_of_memory`. What a step's cgroup does better: the kernel stops the allocation
  that crosses the limit at once and counts page cache; a poll sees RSS, once a second, so a task
  may briefly hold more than its share (the element's cgroup still bounds the whole) and its page
  cache is not counted. A task the kernel's OOM killer ended (the element's cgroup was full: the
  cgroup's oom_kill count rose while the task ran and it died of SIGKILL) is `out_of_memory` too,
  with the count as evidence; its neighbours, not killed, run on. The element's own OOM (sacct's
  OUT_OF_MEMORY for the element) is told apart by which tasks wrote an exit.json: only those that
  did not get the element's fate.
- a stop (an early stop, `cancel` of a task): the tick writes the attempt's stop.request, the
  runner sees it within POLL_S and ends the task as at its time limit, cause `stopped`.
- signals: SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 the element gets (Slurm at the element's time
  limit, `--signal`, scancel) go to every running task's process group; after SIGTERM or SIGINT
  no further task starts, and those that never started get the element's fate."""

from __future__ import annotations

import contextlib
import math
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from types import FrameType

import psutil

from campaignctl.adapters import cgroup_memory
from campaignctl.adapters.process_tree import descendants
from campaignctl.adapters.runner import FORWARDED_SIGNALS, Watch, ignore_warning_signals, run_attempt
from campaignctl.core.pack_plan import Pack, visible_gpu
from campaignctl.core.packing.inline_fates import OUT_OF_MEMORY, STOPPED, TIME_LIMIT
from campaignctl.core.task_launch import TaskLaunch

POLL_S = 1.0
GRACE_S = 30.0  # between SIGTERM and SIGKILL at a task's time limit: Slurm's default KillWait


class _Element:
    """The element's running tasks, for the signals it forwards to them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: dict[int, subprocess.Popen[bytes]] = {}
        self.ending = False
        self.cgroup = cgroup_memory.locate()

    def forward(self, signum: int, _frame: FrameType | None) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.ending = True
        with self.lock:
            running = list(self.live.values())
        for child in running:
            _signal_group(child, signum)

    def watch(self, limit_s: float, mem_mb: int, stop: Path) -> Watch:
        def wait(child: subprocess.Popen[bytes]) -> tuple[int, dict[str, str] | None]:
            with self.lock:
                self.live[child.pid] = child
            if self.ending:  # a SIGTERM that came while it was starting
                _signal_group(child, signal.SIGTERM)
            try:
                return _held_to_limits(child, limit_s, mem_mb, self.cgroup, stop)
            finally:
                with self.lock:
                    self.live.pop(child.pid, None)
        return wait


def run_inline(pack: Pack, launches: Sequence[TaskLaunch]) -> int:
    """Run every task of the pack, `pack.processes` at a time; the number that did not exit 0.
    The element itself exits 0: each task's fate is its own exit.json."""
    ignore_warning_signals()
    element = _Element()
    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, element.forward)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in range(pack.processes):
        slots.put(slot)

    def one(launch: TaskLaunch) -> int:
        if element.ending:
            return 0  # never started: the tick gives it the element's fate
        slot = slots.get()
        try:
            env = {}
            if pack.gpu_of:
                gpus = visible_gpu(visible, pack.gpu_of[slot], max(1, pack.step.gpus))
                if gpus is not None:
                    env["CUDA_VISIBLE_DEVICES"] = gpus
            watch = element.watch(pack.step.time_min * 60, pack.step.mem_mb, launch.paths.stop_request)
            return run_attempt(launch, watch, env)
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=pack.processes) as pool:
        running = [pool.submit(one, launch) for launch in launches]
        # Python runs a signal's handler in the main thread, when it next runs Python code; the
        # kernel may deliver the signal to any thread, so the main thread must not block for long
        while wait(running, timeout=POLL_S).not_done:
            pass
    return sum(future.result() != 0 for future in running)


def _held_to_limits(child: subprocess.Popen[bytes], limit_s: float, mem_mb: int,
                    cgroup: cgroup_memory.CgroupMemory | None, stop: Path) -> tuple[int, dict[str, str] | None]:
    """Wait for the task's program within its time and memory, or until `stop` exists; (return
    code, the cause when a limit or a stop ended it)."""
    ooms = cgroup.oom_kills() if cgroup is not None else None
    began = time.monotonic()
    cause: dict[str, str] | None = None
    kill_at: float | None = None
    while True:
        try:
            code = child.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if kill_at is not None:
            if now >= kill_at:
                _signal_group(child, signal.SIGKILL)
                kill_at = math.inf
            continue
        if now - began >= limit_s or stop.exists():
            cause = ({"cause": STOPPED, "evidence": "campaignctl asked it to stop (its stop.request): SIGTERM, then "
                                                    f"SIGKILL {GRACE_S:g} s later"} if now - began < limit_s else
                     {"cause": TIME_LIMIT, "evidence": f"ran past its time limit ({limit_s / 60:g} min) inside its "
                                                       f"pack's job: SIGTERM, then SIGKILL {GRACE_S:g} s later"})
            _signal_group(child, signal.SIGTERM)
            kill_at = now + GRACE_S
        elif (rss := _tree_rss_mb(child.pid)) > mem_mb:
            cause = {"cause": OUT_OF_MEMORY, "evidence": f"its processes' RSS reached {rss} MB, over its memory "
                                                         f"limit of {mem_mb} MB inside its pack's job: SIGKILL"}
            _signal_group(child, signal.SIGKILL)
            kill_at = math.inf
    if cause is None and code == -signal.SIGKILL and cgroup is not None and ooms is not None:
        after = cgroup.oom_kills()
        if after is not None and after > ooms:
            cause = {"cause": OUT_OF_MEMORY, "evidence": f"killed by the kernel's OOM killer: its pack's job's memory "
                                                         f"cgroup (every task running in it) was full (oom_kill "
                                                         f"{ooms} → {after})"}
    _signal_group(child, signal.SIGKILL)  # what it left running ends with it, as a step's processes do
    return code, cause


def _tree_rss_mb(pid: int) -> int:
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return 0
    tree = [root, *descendants(root)]
    total = 0
    for process in tree:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total // (1024 * 1024)


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)  # the program leads a session of its own (runner.run_attempt)
