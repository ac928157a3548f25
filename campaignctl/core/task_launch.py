"""What one array element runs: the pickled payload's argument (adapters/submission.py stages
`run_task(launch)` per element; adapters/runner.py runs it inside the job). Fields added since
the first release have defaults, and readers tolerate their absence (`getattr`): a payload pickled
by an older campaignctl still runs after an upgrade. Payloads pickled before this class moved
here name it `campaignctl.adapters.runner.TaskLaunch`, which runner.py still imports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from campaignctl.core.attempt_paths import CHECKPOINT, AttemptPaths

DEFAULT_TELEMETRY_S = 10.0


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
    # a multi-node attempt (resources.nodes …): srun | torchrun, '' for one process (core/rendezvous.py)
    launcher: str = ""
    procs_per_node: int = 1
    # `{resume?…}` decided when the attempt starts, by what is there (adapters/resume_check.py):
    # the file or directory to look for ('' → a non-empty checkpoint directory; None → a payload
    # pickled before: `argv` is final, resuming by attempt number), and argv/env for a resume
    resume_check: str | None = None
    resume_argv: tuple[str, ...] = ()
    resume_env: Mapping[str, str] | None = None
    resumed: bool | None = None  # set by the runner once it has looked

    @property
    def attempt_dir(self) -> Path:
        return Path(self.task_dir) / self.attempt_token

    @property
    def paths(self) -> AttemptPaths:
        return AttemptPaths(self.attempt_dir)

    @property
    def checkpoint(self) -> Path:
        # a payload pickled by an older campaignctl has neither field
        return Path(getattr(self, "checkpoint_dir", "") or Path(self.task_dir) / CHECKPOINT)
