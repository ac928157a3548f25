"""What one array element runs: the pickled payload's argument (adapters/submission.py stages
`run_task(launch)` per element; adapters/runner.py runs it inside the job).

A payload outlives the release that pickled it (a pending job runs it after an upgrade), so it
is read through `current_launch`, as a decision's params are through their codec: a slotted
dataclass unpickles only the fields it was pickled with, and reading one it lacks raises
AttributeError, so every field the payload's release did not have takes its default here, and
readers read today's fields as they are. Every field so far was added with a default that keeps
the older behaviour (version 1, written as no `version`); a change that cannot be so raises
LAUNCH_VERSION and adds the converter from the previous version to `_UPGRADES`. Payloads pickled
before this class moved here name it `campaignctl.adapters.runner.TaskLaunch`, which runner.py
still imports."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from pathlib import Path
from typing import Any

from campaignctl.core.model.attempt_paths import CHECKPOINT, AttemptPaths

DEFAULT_TELEMETRY_S = 10.0
LAUNCH_VERSION = 1


@dataclass(frozen=True, slots=True)
class TaskLaunch:
    campaign: str
    task_index: int
    attempt_token: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    workdir: str
    task_dir: str
    attempt_number: int = 1
    telemetry_interval_s: float = DEFAULT_TELEMETRY_S  # seconds between telemetry.jsonl samples; 0 turns sampling off
    checkpoint_dir: str = ""  # shared by every rung of one config; '' → <task_dir>/checkpoint
    rung: int = 0  # a progressive campaign's rung: above 0 the task resumes the config's checkpoint
    # the revision's environment captured at submit ('' → the job's live environment, as before)
    env_file: str = ""
    from_node: tuple[str, ...] = ()  # env_capture.from_node: site variables read live in the job
    setup: tuple[str, ...] = ()  # shell lines run before the program (adapters/setup_lines.py)
    output_metrics: tuple[str, ...] = ()  # metrics.from_output regexes (adapters/output_metrics.py)
    causes: tuple[tuple[str, str], ...] = ()  # the policy's own `causes:` (name, pattern), matched at exit
    # a campaign shared with a Unix group: other members' attempts resume this task's checkpoint
    # and their ticks read this attempt's files, so the job runs under umask 007 (group rw)
    shared: bool = False
    # a multi-node attempt (resources.nodes …): srun | torchrun, '' for one process (core/model/rendezvous.py)
    launcher: str = ""
    procs_per_node: int = 1
    # `{resume?…}` decided when the attempt starts, by what is there (adapters/resume_check.py):
    # the file or directory to look for ('' → a non-empty checkpoint directory; None → a payload
    # pickled before: `argv` is final, resuming by attempt number), and argv/env for a resume
    resume_check: str | None = None
    resume_argv: tuple[str, ...] = ()
    resume_env: Mapping[str, str] | None = None
    resumed: bool | None = None  # set by the runner once it has looked
    run_id: str = ""  # the task's tracker run identity, `{run_id}` (core/model/tracker.py)
    mlflow_run_file: str = ""  # `tracker: mlflow`: where the config's MLflow run id is kept
    version: int = LAUNCH_VERSION  # of these fields' meaning (`current_launch`); absent: 1
    # fields added after `version` come last: an older payload's state list ends before them
    # a multi-node attempt's network interfaces to count (spec telemetry.interfaces; (): every device-backed one)
    net_interfaces: tuple[str, ...] = ()

    def __getstate__(self) -> list[Any]:
        """What pickle keeps: the field values in order, as dataclasses' own __getstate__ returns
        them (its __setstate__ reads them back), without its `fields()` call per object: a
        100,000-task submit pickles 100,000 launches."""
        return list(_STATE(self))

    @property
    def attempt_dir(self) -> Path:
        return Path(self.task_dir) / self.attempt_token

    @property
    def paths(self) -> AttemptPaths:
        return AttemptPaths(self.attempt_dir)

    @property
    def checkpoint(self) -> Path:
        return Path(self.checkpoint_dir or Path(self.task_dir) / CHECKPOINT)


# every field's value at once, in C: a getattr per field was 7 % of a submit
_STATE = attrgetter(*(f.name for f in fields(TaskLaunch)))

# version n → n + 1, applied in turn to the fields of a payload pickled at an older version
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def current_launch(payload: object) -> TaskLaunch:
    """Today's TaskLaunch from an unpickled payload of any release (module docstring)."""
    values: dict[str, Any] = {f.name: getattr(payload, f.name) for f in fields(TaskLaunch) if hasattr(payload, f.name)}
    version = values.get("version", 1)
    for at in range(version if isinstance(version, int) else 1, LAUNCH_VERSION):
        values = _UPGRADES[at](values)
    values["version"] = LAUNCH_VERSION
    return TaskLaunch(**values)

