"""Packs: which tasks one array element runs side by side, what the element's allocation asks
for, and what each task's job step asks for within it. Each packed task stays itself: its own
step (named by its attempt token, so sacct tells its fate apart from its neighbours'), its own
attempt directory, memory limit and exit status.

A submission's packs share one shape (every element of a Slurm array asks for the same
resources): `per_element` tasks to an element, `per_gpu` of them to a GPU, and the element's
CPUs. The steps run with `srun --overlap`: they share the allocation's CPUs and GPUs, each under
its own `--mem` (checked on the lab, 22.05: three `--overlap` steps of 300 MB in a 2-CPU,
1-GPU element ran at once; the one that outgrew its limit ended OUT_OF_MEMORY, the other two
COMPLETED, and so did the element). `--exact` would give each step CPUs of its own, so a pack
would need one CPU per task, more than many GPU nodes have per GPU.

A pack of `processes` runs its tasks as plain processes instead, that many at once and the rest
after them (adapters/inline_pack.py): the element holds `processes` tasks' GPUs, CPUs and memory,
and the time of its tasks one after another in as many rounds as it takes."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from campaignctl.core.resources import Resources
from campaignctl.core.tick.siblings import NodeShape


@dataclass(frozen=True, slots=True)
class PackShape:
    per_element: int  # tasks one array element runs side by side
    per_gpu: int = 1  # of them sharing one GPU (1: each task has GPUs of its own)
    cpus: int = 0  # the element's CPUs (0: each task's cpus_per_task, times the tasks at once)
    processes: int = 0  # tasks run at once as plain processes (0: each task a step, all at once)

    @property
    def at_once(self) -> int:
        """Tasks of one element running at the same time."""
        return self.processes or self.per_element

    def to_json(self) -> str:
        return json.dumps({"per_element": self.per_element, "per_gpu": self.per_gpu, "cpus": self.cpus,
                           **({"processes": self.processes} if self.processes else {})})

    @staticmethod
    def from_json(text: str) -> PackShape | None:
        """The shape a submission row holds; None for an unpacked one ('')."""
        if not text:
            return None
        raw = json.loads(text)
        return PackShape(int(raw["per_element"]), int(raw.get("per_gpu", 1)), int(raw.get("cpus", 0)),
                         int(raw.get("processes", 0)))


@dataclass(frozen=True, slots=True)
class Pack:
    tasks: tuple[int, ...]
    allocation: Resources  # what the element asks for
    step: Resources  # what each task's step asks for
    gpu_of: tuple[int, ...]  # for each task, the index of the allocation's GPU it runs on (() without GPUs)
    processes: int = 0  # run as plain processes, this many at once; gpu_of is then by slot (0: steps)

    @property
    def share(self) -> float:
        """A task's share of the allocation: what its GPU-hours and cost are counted at."""
        return 1 / len(self.tasks)


def allocation(each: Resources, shape: PackShape) -> Resources:
    """What one element of a packed submission asks sbatch for: GPUs for the tasks it runs at
    once, `per_gpu` to a GPU; memory for each one's own limit; the shape's CPUs; each task's time
    (side by side), times the rounds it takes when `processes` run at once."""
    k = shape.at_once
    gpus = math.ceil(k / shape.per_gpu) if each.gpus and shape.per_gpu > 1 else each.gpus * k
    rounds = math.ceil(shape.per_element / k)
    return replace(each, gpus=gpus, cpus_per_task=shape.cpus or each.cpus_per_task * k, mem_mb=each.mem_mb * k,
                   time_min=each.time_min * rounds)


def misfit(each: Resources, shape: PackShape, nodes: Sequence[NodeShape]) -> str | None:
    """Why no node of `nodes` (the partition's, as sinfo lists them) could run one element of the
    pack, with the numbers and what to change; None when one can (or sinfo listed none)."""
    whole = allocation(each, shape)
    if not nodes or any(n.cpus >= whole.cpus_per_task and n.mem_mb >= whole.mem_mb and n.gpus >= whole.gpus
                        for n in nodes):
        return None
    k = shape.at_once
    short = []
    if (most := max(n.cpus for n in nodes)) < whole.cpus_per_task:
        asked = f"pack.cpus {shape.cpus}" if shape.cpus else f"{k} tasks × cpus_per_task {each.cpus_per_task}"
        short.append(f"{whole.cpus_per_task} CPUs ({asked}) where the largest node has {most}: set pack.cpus to "
                     f"at most {most} (the tasks' steps share them)")
    if (most := max(n.mem_mb for n in nodes)) < whole.mem_mb:
        short.append(f"{whole.mem_mb}M of memory ({k} tasks × {each.mem_mb}M) where the largest node has {most}M")
    if (most := max(n.gpus for n in nodes)) < whole.gpus:
        short.append(f"{whole.gpus} GPUs where the largest node has {most}")
    if not short:
        short.append(f"{whole.cpus_per_task} CPUs, {whole.mem_mb}M and {whole.gpus} GPUs together, "
                     "which no one node has")
    at = f"{k} tasks at a time" if shape.processes else f"{k} tasks"
    return f"each job of the pack ({at}) asks {'; and '.join(short)}; or pack fewer tasks to a job"


def gpu_of(each: Resources, shape: PackShape, count: int) -> tuple[int, ...]:
    """The allocation's GPU index of each of `count` tasks of a pack (its first, for a task of
    more GPUs than one)."""
    if not each.gpus:
        return ()
    if shape.per_gpu > 1:
        return tuple(i // shape.per_gpu for i in range(count))
    return tuple(i * each.gpus for i in range(count))


def plan_packs(tasks: Sequence[int], each: Resources, shape: PackShape) -> list[Pack]:
    """`tasks` in order, cut into packs of `shape.per_element`; the last may be smaller, and asks
    for what the others do (an array's elements all ask for the same)."""
    whole = allocation(each, shape)
    size = shape.per_element
    return [Pack(chunk, whole, each, gpu_of(each, shape, shape.processes or len(chunk)), shape.processes)
            for chunk in (tuple(tasks[s:s + size]) for s in range(0, len(tasks), size))]


def step_argv(token: str, step: Resources, command: Sequence[str]) -> list[str]:
    """The `srun` of one packed task inside its element: a step of its own, sharing the element's
    CPUs and GPUs with its neighbours (`--overlap`), named by its attempt token (sacct's JobName
    of the step), under its own memory limit, one Slurm task. `--kill-on-bad-exit=0`: its failure
    ends its step, never its neighbours'.

    `--cpu-bind=none`: the element's own step runs with the site's binding and exports it
    (`SLURM_CPU_BIND=quiet,mask_cpu:0x3` under task/affinity), and srun takes SLURM_CPU_BIND as its
    default; a step of fewer CPUs than the element would inherit a mask outside its own allocation
    and never start ("CPU binding outside of job step allocation", CANCELLED 0:64). Steps that share
    the element's CPUs are bound to none of them; the step's cgroup still holds each to its CPUs."""
    return ["srun", "--overlap", "--ntasks=1", "--nodes=1", f"--cpus-per-task={step.cpus_per_task}",
            "--cpu-bind=none", f"--mem={step.mem_mb}M", f"--job-name={token}", "--kill-on-bad-exit=0", *command]


def visible_gpu(pack_visible: str | None, index: int, count: int = 1) -> str | None:
    """CUDA_VISIBLE_DEVICES for a task on the pack's GPUs `index`..`index+count-1` (places in the
    allocation's list, which Slurm sets for the job); None when the pack holds no GPU list."""
    listed = [g for g in (pack_visible or "").split(",") if g]
    chosen = listed[index:index + count] if index >= 0 else []
    return ",".join(chosen) if len(chosen) == count else None
