"""Job side: the environment a task's program starts with (the rule in core/model/job_env.py), and the
setup lines run on it. The runner calls `prepare_environment` once per attempt."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from campaignctl.adapters.env_capture import read_captured_env
from campaignctl.adapters.setup_lines import SETUP_FAILED, run_setup
from campaignctl.core.model.job_env import PROGRAM_DEFAULTS, program_environment
from campaignctl.core.model.params import resumes
from campaignctl.core.task_launch import TaskLaunch


@dataclass(frozen=True, slots=True)
class PreparedEnv:
    env: dict[str, str]
    code: int = 0  # non-zero: the attempt fails before its program starts
    cause: str | None = None
    evidence: str = ""


def runner_variables(launch: TaskLaunch) -> dict[str, str]:
    """CAMPAIGNCTL_*: what the runner tells the program about this attempt."""
    rung = launch.rung
    env = {
        "CAMPAIGNCTL_CAMPAIGN": launch.campaign,
        "CAMPAIGNCTL_TASK_INDEX": str(launch.task_index),
        "CAMPAIGNCTL_ATTEMPT_TOKEN": launch.attempt_token,
        "CAMPAIGNCTL_ATTEMPT_DIR": str(launch.attempt_dir),
        "CAMPAIGNCTL_CHECKPOINT_DIR": str(launch.checkpoint),
        "CAMPAIGNCTL_METRICS": str(launch.paths.metrics),
        "CAMPAIGNCTL_ATTEMPT": str(launch.attempt_number),
        "CAMPAIGNCTL_RUNG": str(rung),
    }
    if launch.run_id:
        env["CAMPAIGNCTL_RUN_ID"] = launch.run_id
    resumed = launch.resumed  # None: a payload pickled before the runner looked
    if resumes(launch.attempt_number, rung) if resumed is None else resumed:
        env["CAMPAIGNCTL_RESUME"] = "1"
    return env


def base_environment(launch: TaskLaunch, live: Mapping[str, str]) -> dict[str, str]:
    """Before setup. Raises OSError when the revision's captured environment cannot be read.
    A launch without one (pickled by an older campaignctl, or a revision recorded before
    capture existed) keeps the old behaviour: the job's live environment as the base."""
    env_file = launch.env_file
    if not env_file:
        return {**PROGRAM_DEFAULTS, **live, **launch.env, **runner_variables(launch)}
    return program_environment(read_captured_env(env_file), live, launch.env, runner_variables(launch),
                               launch.from_node)


def prepare_environment(launch: TaskLaunch, log_path: Path) -> PreparedEnv:
    """The program's environment: the base, then the setup lines (output to `log_path`)."""
    try:
        env = base_environment(launch, os.environ)
    except OSError as exc:
        return PreparedEnv({}, 1, SETUP_FAILED,
                           f"the environment captured at submit ({launch.env_file}) cannot be read on "
                           f"this node: {exc.strerror or exc}")
    lines = launch.setup
    if not lines:
        return PreparedEnv(env)
    with open(log_path, "ab", buffering=0) as log:
        outcome = run_setup(lines, env, launch.workdir, log, log_path)
    if outcome.failed:
        return PreparedEnv({}, outcome.code, SETUP_FAILED, outcome.evidence)
    return PreparedEnv({**outcome.env, **runner_variables(launch)})
