"""Every file of a task's and an attempt's directory, named in one place, as submitit's JobPaths
names a job's. The job-side runner writes them and the login side reads them:

    <run_dir>/tasks/<index>/checkpoint/            shared by the task's attempts (and rungs)
    <run_dir>/tasks/<index>/<attempt token>/
        started.json      where and when the runner started (`started.rank<r>.json` for rank r)
        output.log        the program's stdout and stderr (`output.rank<r>.log`)
        telemetry.jsonl   the job-side sampler's lines (`telemetry.node<k>.jsonl` on node k)
        metrics.jsonl     training metrics: the program's own ($CAMPAIGNCTL_METRICS), or its output's
        exit.json         return code, named cause and evidence (`exit.rank<r>.json`)
        launch.pickle     a packed task's payload, which its own srun step runs (adapters/packed_task.py)
        srun.err          what that step's srun wrote to stderr (a step srun refused: its words)
        stop.request      a plain-process pack's task to stop: what scancel of its step would be
                          (adapters/inline_pack.py watches for it)

Pure: paths are built, never touched. Hot paths (a tick may name 100,000 files) use `file_in`,
which builds one string."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

TASKS = "tasks"
CHECKPOINT = "checkpoint"
STARTED = "started.json"
OUTPUT_LOG = "output.log"
TELEMETRY = "telemetry.jsonl"
METRICS = "metrics.jsonl"
EXIT = "exit.json"
STOP_REQUEST = "stop.request"
EXITS = "exit*.json"  # every rank's: exit.json and exit.rank<r>.json
LAUNCH = "launch.pickle"
SRUN_ERR = "srun.err"


def tasks_dir(run_dir: str) -> Path:
    return Path(run_dir) / TASKS


def task_dir(run_dir: str, task_index: int) -> Path:
    """Where a task's attempts write, and its checkpoint directory."""
    return Path(run_dir) / TASKS / str(task_index)


def checkpoint_dir(run_dir: str, config: int) -> str:
    """A config's checkpoint directory, shared by its attempts and its rungs (a rung's task of the
    config is the config's first task: `<run_dir>/tasks/<config>/checkpoint`)."""
    if run_dir[-1:] not in ("", "/"):  # posixpath.join's answer, without its checks per part
        return f"{run_dir}/{TASKS}/{config}/{CHECKPOINT}"
    return posixpath.join(run_dir, TASKS, str(config), CHECKPOINT)


def file_in(tasks: str, task_index: int, token: str, name: str) -> str:
    """`<tasks>/<index>/<token>/<name>` as one string (`tasks`: `tasks_dir(run_dir)`)."""
    return f"{tasks}/{task_index}/{token}/{name}"


def rank_name(name: str, suffix: str) -> str:
    """`output.log` → `output.rank3.log` for rank 3's suffix `.rank3` ('' for rank 0 or one process)."""
    stem, dot, ext = name.rpartition(".")
    return f"{stem}{suffix}{dot}{ext}" if dot else name + suffix


def rank_of_exit(name: str) -> str:
    """`exit.rank3.json` → '3'; `exit.json` → '0'."""
    prefix, end = "exit.rank", ".json"
    return name[len(prefix):-len(end)] if name.startswith(prefix) and name.endswith(end) else "0"


@dataclass(frozen=True, slots=True)
class AttemptPaths:
    folder: Path

    @classmethod
    def of(cls, run_dir: str, task_index: int, token: str) -> AttemptPaths:
        return cls(task_dir(run_dir, task_index) / token)

    def started(self, suffix: str = "") -> Path:
        return self.folder / rank_name(STARTED, suffix)

    def output(self, suffix: str = "") -> Path:
        return self.folder / rank_name(OUTPUT_LOG, suffix)

    def exit(self, suffix: str = "") -> Path:
        return self.folder / rank_name(EXIT, suffix)

    def telemetry(self, node_rank: int = 0) -> Path:
        return self.folder / (f"telemetry.node{node_rank}.jsonl" if node_rank else TELEMETRY)

    @property
    def metrics(self) -> Path:
        return self.folder / METRICS

    @property
    def launch(self) -> Path:
        return self.folder / LAUNCH

    @property
    def srun_err(self) -> Path:
        return self.folder / SRUN_ERR

    @property
    def stop_request(self) -> Path:
        return self.folder / STOP_REQUEST
