"""Crash points for tests: `CAMPAIGNCTL_FAULT=<point>` kills the process at that point with
SIGKILL-like abruptness (no cleanup, no flush), as a power cut or `kill -9` would."""

from __future__ import annotations

import os


def crash_point(name: str) -> None:
    if os.environ.get("CAMPAIGNCTL_FAULT") == name:
        os._exit(137)


def step_options(first: bool) -> list[str]:
    """`CAMPAIGNCTL_FAULT=step_launch` (in the environment sbatch exports to the job): the first
    packed step asks for a CPU binding outside its allocation, as a site's inherited
    SLURM_CPU_BIND did, so srun refuses to start it (`CANCELLED 0:64` after 0 s)."""
    return ["--cpu-bind=map_cpu:63"] if first and os.environ.get("CAMPAIGNCTL_FAULT") == "step_launch" else []
