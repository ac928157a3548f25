"""Packs: which tasks one Slurm allocation runs side by side, what the allocation asks for, and
what each task's job step asks for within it (`srun --exact` with the step's own CPUs, memory
limit and GPU). Each packed task stays itself: its own step (named by its attempt token, so
sacct tells its fate apart from its neighbours'), its own attempt directory and exit status.

A pack of K tasks, N to a GPU, holds ceil(K / N) GPUs, K times each task's CPUs and memory, and
each task's time limit (they run side by side). The last pack of a campaign may be smaller."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from campaignctl.core.resources import Resources


@dataclass(frozen=True, slots=True)
class Pack:
    tasks: tuple[int, ...]
    allocation: Resources  # what sbatch asks for the pack
    step: Resources  # what each task's step asks for (gpus: 0 when it shares one of the allocation's)
    gpu_of: tuple[int, ...]  # for each task, the index of the allocation's GPU it runs on (() without GPUs)

    @property
    def share(self) -> float:
        """A task's share of the allocation: what its GPU-hours and cost are counted at."""
        return 1 / len(self.tasks)


def pack_size(per_gpu: int, per_job: int) -> int:
    """Tasks one allocation runs: per_job when given, else the tasks that share its one GPU."""
    return per_job if per_job > 1 else per_gpu


def plan_packs(tasks: Sequence[int], each: Resources, per_gpu: int, per_job: int) -> list[Pack]:
    """`tasks` in order, cut into packs; `each`: one task's resources (one node; one GPU or none
    when per_gpu > 1, as core/pack_spec.py admits)."""
    size = pack_size(per_gpu, per_job)
    out = []
    for start in range(0, len(tasks), size):
        chunk = tuple(tasks[start:start + size])
        out.append(_pack(chunk, each, per_gpu))
    return out


def _pack(chunk: tuple[int, ...], each: Resources, per_gpu: int) -> Pack:
    k = len(chunk)
    if each.gpus and per_gpu > 1:
        gpus = math.ceil(k / per_gpu)
        gpu_of = tuple(i // per_gpu for i in range(k))
    else:
        gpus = each.gpus * k
        gpu_of = tuple(i * each.gpus for i in range(k)) if each.gpus else ()
    allocation = replace(each, gpus=gpus, cpus_per_task=each.cpus_per_task * k, mem_mb=each.mem_mb * k)
    return Pack(chunk, allocation, each, gpu_of)


def step_argv(token: str, step: Resources, command: Sequence[str]) -> list[str]:
    """The `srun` of one packed task inside its pack's allocation: a step of its own (`--exact`:
    only the CPUs and memory it asks for, so the pack's other tasks start beside it) named by its
    attempt token (sacct's JobName of the step, core/pack_steps.py), with its own memory limit, one
    Slurm task, and no GPU request of its own (it runs on the GPU CUDA_VISIBLE_DEVICES names, one
    of the pack's); `--kill-on-bad-exit=0`: its failure ends its step, never its neighbours'."""
    return ["srun", "--exact", "--ntasks=1", f"--cpus-per-task={step.cpus_per_task}", f"--mem={step.mem_mb}M",
            f"--job-name={token}", "--kill-on-bad-exit=0", *command]


def visible_gpu(pack_visible: str | None, index: int) -> str | None:
    """CUDA_VISIBLE_DEVICES for a task on the pack's GPU `index` (its place in the allocation's
    list, which Slurm sets for the batch step); None when the pack holds no GPU list."""
    listed = [g for g in (pack_visible or "").split(",") if g]
    return listed[index] if 0 <= index < len(listed) else None
