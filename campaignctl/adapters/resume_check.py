"""Job side: whether an attempt resumes, decided when it starts by what is on disk, not by its
attempt number. An OOM in the first epoch leaves no checkpoint, so attempt 2 must start over
(timm's `--resume` of a missing file exits "No checkpoint found", read as a bug); nanoGPT writes
`ckpt.pt` only once validation improves, then loads it unconditionally on `--init_from=resume`.

The mark is the spec's `checkpoint:` (a file, or a directory that counts once non-empty), else the
task's checkpoint directory once non-empty. An empty file is a save cut short, not a checkpoint."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from campaignctl.core.task_launch import TaskLaunch


def checkpoint_present(path: Path) -> bool:
    try:
        if path.is_dir():
            return any(path.iterdir())
        return path.stat().st_size > 0
    except OSError:  # missing, or unreadable from this node: nothing to resume from
        return False


def mark_of(launch: TaskLaunch) -> Path:
    check = launch.resume_check
    return Path(launch.workdir) / check if check else launch.checkpoint


def as_started(launch: TaskLaunch) -> TaskLaunch:
    """`launch` with the side of `{resume?…}` that what is there says (`resumed` set). A payload
    pickled before this rule (no `resume_check`) is returned as it is: it resumes by attempt."""
    if launch.resume_check is None:
        return launch
    if not checkpoint_present(mark_of(launch)):
        return dataclasses.replace(launch, resumed=False)
    env = launch.resume_env if launch.resume_env is not None else launch.env
    return dataclasses.replace(launch, resumed=True, argv=launch.resume_argv or launch.argv, env=env)


def resume_note(launch: TaskLaunch) -> str:
    """The line the attempt's output starts with when it matters: a resume, or an attempt that
    was expected to resume (a retry, a promoted rung) and starts over."""
    resumed = launch.resumed
    if resumed is None:
        return ""
    if resumed:
        return f"campaignctl: resuming: {mark_of(launch)} is there\n"
    if launch.attempt_number > 1 or launch.rung > 0:
        return f"campaignctl: starting over: nothing at {mark_of(launch)} to resume from\n"
    return ""
