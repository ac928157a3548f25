"""The job-side runner: what every array element executes (adapters/job_main.py loads it).

It runs the task's argv without a shell, streams stdout+stderr to the attempt's `output.log`,
forwards the signals Slurm sends before a kill (SIGTERM at the time limit, SIGUSR2 from
`--signal=USR2@90`) so the program can checkpoint, samples its process tree and GPUs into
`telemetry.jsonl` while it runs (adapters/telemetry_sampler.py), and writes `exit.json` atomically. It
then exits with the program's status, so sacct shows FAILED n:0 for a failing program.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from campaignctl.adapters.output_causes import output_cause
from campaignctl.adapters.output_metrics import metrics_from_output
from campaignctl.adapters.paths import write_atomic
from campaignctl.adapters.rendezvous import meet
from campaignctl.adapters.resume_check import as_started, resume_note
from campaignctl.adapters.task_env import base_environment, prepare_environment
from campaignctl.adapters.telemetry_sampler import TelemetrySampler
from campaignctl.adapters.tracker_runs import mlflow_run
from campaignctl.core.base.errors import CampaignctlError
from campaignctl.core.model.rendezvous import Placement, placement, rank_environment, torchrun_argv
from campaignctl.core.resources import TORCHRUN

# TaskLaunch is imported here too: payloads pickled before it moved to core name it runner.TaskLaunch
from campaignctl.core.task_launch import TaskLaunch, current_launch

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
# The program starts with these IGNORED: an ignored disposition survives exec, a handler the
# program installs replaces it (signal(7)). So `--signal=USR2@90` reaches a program that asks for
# it (to checkpoint), and does not kill one that never heard of it: that one used to die 90 s
# before its limit with exit 140, read as FAILED (a bug, given up) instead of TIMEOUT (retried
# with more time), and at once when the limit was under 90 s.
IGNORED_UNLESS_HANDLED = (signal.SIGUSR1, signal.SIGUSR2)


def task_environment(launch: TaskLaunch) -> dict[str, str]:
    """The program's environment before any setup line (adapters/task_env.py)."""
    return base_environment(launch, os.environ)


def _placement(launch: TaskLaunch) -> Placement | None:
    return placement(os.environ) if launch.launcher else None


def _rank_setup(launch: TaskLaunch, where: Placement, env: dict[str, str], log_path: Path) -> tuple[str, ...] | None:
    """The program's argv, the rendezvous variables added to `env`; None when rank 0's point
    could not be had (said in the log)."""
    try:
        addr, port = meet(launch.attempt_dir, where, os.environ.get("SLURMD_NODENAME", socket.gethostname()))
    except (OSError, ValueError, CampaignctlError) as exc:  # no free port, rank 0 never wrote, scontrol failed
        with open(log_path, "ab", buffering=0) as log:
            log.write(f"campaignctl: no rendezvous point for rank {where.rank}: {exc}\n".encode())
        return None
    env.update(rank_environment(where, addr, port, launch.launcher, launch.procs_per_node))
    if launch.launcher == TORCHRUN:
        return torchrun_argv(launch.argv, where, addr, port, launch.procs_per_node)
    return launch.argv


def _context() -> dict[str, object]:
    return {
        "node": os.environ.get("SLURMD_NODENAME", socket.gethostname()),
        "job_id": os.environ.get("SLURM_ARRAY_JOB_ID", os.environ.get("SLURM_JOB_ID", "")),
        "array_index": os.environ.get("SLURM_ARRAY_TASK_ID"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cpus": sorted(os.sched_getaffinity(0)),
        "pid": os.getpid(),
    }


# How a plain-process pack's runner waits for one task (adapters/inline_pack.py): the program's
# return code, and the cause when the wait itself ended it (its time or memory limit).
Watch = Callable[[subprocess.Popen[bytes]], tuple[int, dict[str, str] | None]]


def ignore_warning_signals() -> None:
    for sig in IGNORED_UNLESS_HANDLED:
        # first thing: from here an early warning signal can neither kill this process nor reach
        # submitit's own USR2 handler (the bootstrap of jobs an earlier release submitted), which
        # would `scontrol requeue` the job behind the policy
        signal.signal(sig, signal.SIG_IGN)  # inherited by the child; our forwarders come after Popen


def run_task(launch: TaskLaunch) -> None:
    """Entry point inside the job. Never returns normally unless the program exited 0.
    In a multi-node attempt every rank runs this: rank 0 writes the attempt's files, rank r
    writes its own beside them (`output.rank<r>.log`, `exit.rank<r>.json`)."""
    ignore_warning_signals()
    code = run_attempt(launch)
    if code != 0:
        sys.exit(code if code > 0 else 128 - code)  # killed by signal N → 128+N, like a shell


def run_attempt(launch: TaskLaunch, watch: Watch | None = None, env: Mapping[str, str] | None = None) -> int:
    """One attempt's files and program; its return code. `watch`: the program runs in a session
    of its own and `watch` waits for it (the caller forwards signals); `env`: set for the program
    over what the task's environment says (a plain-process pack's GPU for the task)."""
    launch = current_launch(launch)  # a payload pickled by an older release lacks later fields
    if launch.shared:
        os.umask(0o007)  # inherited by the program; directories made inside `tasks/` stay setgid
    where = _placement(launch)
    suffix = where.suffix if where else ""
    files = launch.paths
    files.folder.mkdir(parents=True, exist_ok=True)
    launch = as_started(launch)  # before the checkpoint directory is made: it is the mark without `checkpoint:`
    launch.checkpoint.mkdir(parents=True, exist_ok=True)
    started = time.time()
    resumed = {"resumed": launch.resumed} if launch.resumed is not None else {}
    write_atomic(files.started(suffix), json.dumps({**_context(), "started_at": started, **resumed}))
    log_path = files.output(suffix)
    with open(log_path, "ab") as log:  # made here, so that `output` finds it before the program writes
        log.write(resume_note(launch).encode())
    prepared = prepare_environment(launch, log_path)
    prepared.env.update(env or {})
    if launch.mlflow_run_file and not prepared.code and not suffix and "MLFLOW_RUN_ID" not in prepared.env:
        _continue_mlflow_run(launch, prepared.env, log_path)
    argv = launch.argv if where is None or prepared.code else _rank_setup(launch, where, prepared.env, log_path)
    limit: dict[str, str] | None = None
    with metrics_from_output(launch, log_path) if not suffix else contextlib.nullcontext():
        code = prepared.code or 1
        if not prepared.code and argv is not None:
            code, limit = _run_program(launch, argv, log_path, prepared.env, where, watch)
    # a failed setup line is the cause, then a limit the pack's runner held it to; else the output's own
    cause = ({"cause": prepared.cause, "evidence": prepared.evidence} if prepared.cause
             else limit or output_cause(log_path, code, launch.causes))
    write_atomic(files.exit(suffix), json.dumps({
        **_context(), "returncode": code, "started_at": started, "ended_at": time.time(), **resumed, **cause}))
    return code


def _continue_mlflow_run(launch: TaskLaunch, env: dict[str, str], log_path: Path) -> None:
    run_id, line = mlflow_run(launch, env)
    if run_id:
        env["MLFLOW_RUN_ID"] = run_id
    with open(log_path, "ab") as log:
        log.write(line.encode())


def _run_program(launch: TaskLaunch, argv: tuple[str, ...], log_path: Path, env: Mapping[str, str],
                 where: Placement | None, watch: Watch | None) -> tuple[int, dict[str, str] | None]:
    with open(log_path, "ab", buffering=0) as log:
        try:
            child = subprocess.Popen(list(argv), cwd=launch.workdir, env=env, start_new_session=watch is not None,
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        except OSError as exc:  # program missing or not executable: the shell's 127/126
            log.write(f"campaignctl: cannot start {argv[0]!r}: {exc}\n".encode())
            return 127 if isinstance(exc, FileNotFoundError) else 126, None

        def forward(signum: int, _frame: FrameType | None) -> None:
            child.send_signal(signum)

        if watch is None:  # signal handlers are the main thread's; a pack's runner forwards its own
            for sig in FORWARDED_SIGNALS:
                signal.signal(sig, forward)
        # one sampler per node, in its first process (a node's line: core/usage/telemetry.py)
        # a pack's runner (`watch`) runs its tasks in the element's cgroup, together: not the task's own
        sampler = _start_sampler(launch, child.pid, env, log, where, own_cgroup=watch is None) \
            if not where or where.local_rank == 0 else None
        try:
            return (child.wait(), None) if watch is None else watch(child)
        finally:
            if sampler is not None:
                sampler.stop()  # final sample and end line, before the log closes


def _start_sampler(launch: TaskLaunch, pid: int, env: Mapping[str, str], log: BinaryIO,
                   where: Placement | None, own_cgroup: bool) -> TelemetrySampler | None:
    interval = launch.telemetry_interval_s
    if interval <= 0:
        return None
    sampler = TelemetrySampler(launch.paths.telemetry(where.node_rank if where else 0), pid, interval,
                               cuda_visible=env.get("CUDA_VISIBLE_DEVICES"),
                               note=lambda text: log.write(text.encode()),
                               node=os.environ.get("SLURMD_NODENAME", "") if where else "",
                               own_cgroup=own_cgroup, interfaces=launch.net_interfaces if where else None)
    return sampler.start()

