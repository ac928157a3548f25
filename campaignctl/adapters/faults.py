"""Crash points for tests: `CAMPAIGNCTL_FAULT=<point>` kills the process at that point with
SIGKILL-like abruptness (no cleanup, no flush), as a power cut or `kill -9` would."""

from __future__ import annotations

import os


def crash_point(name: str) -> None:
    if os.environ.get("CAMPAIGNCTL_FAULT") == name:
        os._exit(137)


def step_options(first: bool) -> list[str]:
    """`CAMPAIGNCTL_FAULT=step_launch` (in the environment sbatch exports to the job): the first
    packed step asks for more memory than its job holds, which srun refuses at step creation on
    any site ("Memory required by task is not available"; sacct has no line for the step). A CPU
    binding outside the step fails only where task/affinity applies it (CANCELLED 0:64)."""
    return ["--mem=999999M"] if first and os.environ.get("CAMPAIGNCTL_FAULT") == "step_launch" else []
