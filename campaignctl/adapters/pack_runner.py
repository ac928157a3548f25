"""Job side of a pack: inside the pack's allocation, one `srun` step per packed task, side by side
(core/pack_plan.py), each running that task's own runner (adapters/runner.py run_task) with its
own attempt directory, output, exit status and telemetry. It waits for every step. A task that
fails, runs out of memory or is killed ends its own step only; the pack itself exits 0, since each
task's fate is its step's (sacct) and its own exit.json.

A step srun refuses to start never runs the task's runner: srun's error would be only in the
element's Slurm log, which nothing points to. Each step's srun writes its stderr beside the task's
files; for a step that never started, the pack's runner writes the task's exit.json (cause
`launch_failed`, srun's words as evidence, answered by a retry that runs alone) and puts srun's
words in the task's output, where `output` and `status` look."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from campaignctl.adapters import faults
from campaignctl.adapters.paths import write_atomic
from campaignctl.core.pack_plan import Pack, step_argv, visible_gpu
from campaignctl.core.policy.output_causes import EVIDENCE_BYTES, LAUNCH_FAILED
from campaignctl.core.task_launch import TaskLaunch


def run_pack(pack: Pack, launches: Sequence[TaskLaunch], environ: Mapping[str, str] | None = None) -> int:
    """Start every task's step, wait for all; the number of tasks whose step failed."""
    env = dict(os.environ if environ is None else environ)
    children: list[tuple[TaskLaunch, subprocess.Popen[bytes]]] = []
    for i, (launch, gpu) in enumerate(zip(launches, pack.gpu_of or (None,) * len(launches), strict=True)):
        launch.paths.folder.mkdir(parents=True, exist_ok=True)
        payload = launch.paths.launch
        payload.unlink(missing_ok=True)  # a file left in its place is never written through
        fd = os.open(payload, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:  # private: adapters/packed_task.py runs only such a file
            pickle.dump(launch, handle)
        step_env = dict(env)
        visible = visible_gpu(env.get("CUDA_VISIBLE_DEVICES"), gpu, max(1, pack.step.gpus)) if gpu is not None else None
        if visible is not None:
            step_env["CUDA_VISIBLE_DEVICES"] = visible
        argv = [*step_argv(launch.attempt_token, pack.step, []), *faults.step_options(i == 0),
                sys.executable, "-m", "campaignctl.adapters.packed_task", str(payload)]
        with open(launch.paths.srun_err, "wb") as err:
            children.append((launch, subprocess.Popen(argv, env=step_env, stdin=subprocess.DEVNULL, stderr=err)))
    failed = 0
    for launch, child in children:
        code = child.wait()
        said = _srun_said(launch)
        sys.stderr.write(said)  # the element's log keeps what it always had
        if code != 0:
            failed += 1
            if not launch.paths.started().exists():
                _never_started(launch, code, said)
    return failed


def _srun_said(launch: TaskLaunch) -> str:
    try:
        with open(launch.paths.srun_err, "rb") as err:
            return err.read(EVIDENCE_BYTES).decode(errors="replace")
    except OSError:
        return ""


def _never_started(launch: TaskLaunch, code: int, said: str) -> None:
    """The task's runner never ran (srun refused its step): its exit.json and output say why."""
    evidence = said.strip() or f"srun exited {code} before the task's step started"
    with open(launch.paths.output(), "ab") as log:
        log.write(f"campaignctl: the task's step did not start: {evidence}\n".encode())
    write_atomic(launch.paths.exit(), json.dumps({
        "returncode": code, "started_at": None, "ended_at": time.time(),
        "node": os.environ.get("SLURMD_NODENAME", ""), "cause": LAUNCH_FAILED, "evidence": evidence}))
