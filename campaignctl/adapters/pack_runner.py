"""Job side of a pack: inside the pack's allocation, one `srun` step per packed task, side by side
(core/pack_plan.py), each running that task's own runner (adapters/runner.py run_task) with its
own attempt directory, output, exit status and telemetry. It waits for every step. A task that
fails, runs out of memory or is killed ends its own step only; the pack itself exits 0, since each
task's fate is its step's (sacct) and its own exit.json."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Mapping, Sequence

from campaignctl.core.pack_plan import Pack, step_argv, visible_gpu
from campaignctl.core.task_launch import TaskLaunch

LAUNCH_FILE = "launch.pickle"  # in the attempt directory: what the task's step runs


def run_pack(pack: Pack, launches: Sequence[TaskLaunch], environ: Mapping[str, str] | None = None) -> int:
    """Start every task's step, wait for all; the number of tasks whose step failed."""
    env = dict(os.environ if environ is None else environ)
    children = []
    for launch, gpu in zip(launches, pack.gpu_of or (None,) * len(launches), strict=True):
        launch.paths.folder.mkdir(parents=True, exist_ok=True)
        payload = launch.paths.folder / LAUNCH_FILE
        payload.unlink(missing_ok=True)  # a file left in its place is never written through
        fd = os.open(payload, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:  # private: adapters/pack_step.py runs only such a file
            pickle.dump(launch, handle)
        step_env = dict(env)
        visible = visible_gpu(env.get("CUDA_VISIBLE_DEVICES"), gpu, max(1, pack.step.gpus)) if gpu is not None else None
        if visible is not None:
            step_env["CUDA_VISIBLE_DEVICES"] = visible
        argv = step_argv(launch.attempt_token, pack.step, [sys.executable, "-m", "campaignctl.adapters.pack_step",
                                                           str(payload)])
        children.append(subprocess.Popen(argv, env=step_env, stdin=subprocess.DEVNULL))
    return sum(child.wait() != 0 for child in children)
