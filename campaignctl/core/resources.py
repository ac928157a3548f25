"""What one task asks Slurm for."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

SRUN, TORCHRUN = "srun", "torchrun"
LAUNCHERS = (SRUN, TORCHRUN)


@dataclass(frozen=True, slots=True)
class Resources:
    partition: str | None = None
    gpus: int = 0
    gpu_type: str | None = None
    cpus_per_task: int = 1
    mem_mb: int = 1024
    time_min: int = 60
    cpu_bind: str | None = None
    gpu_bind: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    exclude: str | None = None
    nodes: int = 1  # one attempt spans this many nodes; gpus, cpus and mem are per node
    tasks_per_node: int = 1  # processes per node (the srun launcher: one Slurm task each)
    launcher: str = SRUN  # srun: one Slurm task per process; torchrun: one per node, torchrun forks

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def distributed(self) -> bool:
        """The runner sets the rendezvous variables (RANK, WORLD_SIZE, MASTER_ADDR …)."""
        return self.world_size > 1 or self.launcher == TORCHRUN

    @property
    def slurm_tasks_per_node(self) -> int:
        """sbatch --ntasks-per-node: torchrun is one Slurm task per node that starts the processes."""
        return 1 if self.launcher == TORCHRUN else self.tasks_per_node

    @property
    def slurm_cpus_per_task(self) -> int:
        """sbatch --cpus-per-task: torchrun's one task holds the CPUs of all its processes."""
        return self.cpus_per_task * (self.tasks_per_node if self.launcher == TORCHRUN else 1)

    @property
    def total_cpus(self) -> int:
        """What the whole allocation holds: every node's processes' CPUs."""
        return self.nodes * self.tasks_per_node * self.cpus_per_task

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus

    @property
    def gres(self) -> str | None:
        """sbatch --gres value: gpu:<type>:<n> or gpu:<n>."""
        if not self.gpus:
            return None
        return f"gpu:{self.gpu_type}:{self.gpus}" if self.gpu_type else f"gpu:{self.gpus}"

    @property
    def warning_signal_delay_s(self) -> int | None:
        """Seconds before the time limit for `--signal=USR2@N`, or None for no warning signal.

        sbatch(1): "the signal may be sent up to 60 seconds earlier than specified". A USR2 that
        lands while the task is still starting (Python loading, before the runner
        ignores it) kills it with FAILED 12:0 (seen on the lab cluster with 1–2 minute limits).
        So the signal is never due in the first minute: 90 s before the limit when the limit
        leaves room, less for a 3-minute limit, none at all under that."""
        delay = min(WARNING_SIGNAL_S, self.time_min * 60 - SLURM_SIGNAL_SLACK_S - STARTUP_GRACE_S)
        return delay if delay >= MIN_WARNING_SIGNAL_S else None

    @property
    def least_time_for_its_signal_min(self) -> int:
        """The shortest time limit a job submitted with these resources may be given in place
        (`scontrol update TimeLimit=`): its `--signal=USR2@N` stays as submitted (scontrol cannot
        change it), so a shorter limit moves the signal into the task's first minute, where it
        kills the task with exit 140 before the runner ignores it (seen in CI: a pending element
        lowered from 10 to 2 minutes got USR2 at its start). 0 when it has no signal."""
        delay = self.warning_signal_delay_s
        return 0 if delay is None else math.ceil((delay + SLURM_SIGNAL_SLACK_S + STARTUP_GRACE_S) / 60)


WARNING_SIGNAL_S = 90  # submitit's default, ample for a checkpoint
SLURM_SIGNAL_SLACK_S = 60  # how early Slurm may send it (sbatch(1), --signal)
STARTUP_GRACE_S = 60  # never due in the task's first minute
MIN_WARNING_SIGNAL_S = 30  # below this a warning is too short to checkpoint: leave it to SIGTERM


def _of_its_kind(name: str, value: object) -> bool:
    """An int where the field's default is one (never a bool), else a string or None."""
    if isinstance(_DEFAULTS[name], int):
        return isinstance(value, int) and not isinstance(value, bool)
    return value is None or isinstance(value, str)


def resources_from(data: object) -> Resources | None:
    """Resources from their JSON form (asdict's), unknown keys left out; None if it is not an
    object or a field's value is not of its kind."""
    if not isinstance(data, dict):
        return None
    known = {k: v for k, v in data.items() if k in _DEFAULTS}
    if not all(_of_its_kind(k, v) for k, v in known.items()):
        return None
    return Resources(**known)


def with_fields(base: Resources, changes: Mapping[str, object]) -> Resources:
    """`base` with `changes` to its fields (unknown names left out). A value not of its field's
    kind is a bug in the caller: ValueError."""
    wrong = [k for k, v in changes.items() if k in _DEFAULTS and not _of_its_kind(k, v)]
    if wrong:
        raise ValueError(f"resources: {', '.join(f'{k}={changes[k]!r}' for k in wrong)} is not of its kind")
    checked: dict[str, Any] = {k: v for k, v in changes.items() if k in _DEFAULTS}  # each of its kind
    return replace(base, **checked)


_DEFAULTS: dict[str, object] = {f.name: f.default for f in fields(Resources)}
