"""The spec's `pack:` key: small tasks sharing GPUs and jobs.

    pack: auto                           # tasks per GPU chosen from the profile's history
    pack: {auto: {max_per_gpu: 4}}       # the same, never more than 4 per GPU
    pack: {per_gpu: 4}                   # 4 tasks share each GPU
    pack: {per_job: 8}                   # one Slurm job runs 8 tasks on its allocation
    pack: {per_gpu: 4, cpus: 2}          # …on 2 CPUs for the 4 (default: each task's cpus_per_task, × 4)
    pack: {per_job: 500, processes: 4}   # one job runs 500 tasks as plain processes, 4 at a time

`processes:` is for tasks too small to deserve a job step each: no `srun` per task, so no step
creation RPC and no accounting row; each task keeps its attempt directory, output, exit status,
telemetry and retries, and the element's runner holds it to its own time and memory
(adapters/inline_pack.py says how, and what a step's cgroup would have done better).

Packing is for one-GPU, one-node tasks: a multi-node task is never packed (each of its nodes is
already one rank's), and `per_gpu` and `auto` pack tasks that ask for exactly one GPU. `auto`
needs `profile:` (its history is where the measurements come from); for tasks without a GPU it
packs only short ones, as plain processes, as many at once as `cpus` holds
(core/packing/packing.py). With rungs, the first rung packs and promoted rungs run alone: a
screening rung is the cheap end packing is for."""

from __future__ import annotations

from dataclasses import dataclass

from campaignctl.core.base.reader import Reader
from campaignctl.core.resources import Resources

PACK_KEYS = ("per_gpu", "per_job", "auto", "cpus", "processes")
AUTO_KEYS = ("max_per_gpu",)
MAX_PER_GPU = 16  # NVIDIA MPS serves at most 48 clients per GPU; 16 tasks per GPU is already a crowd
MAX_PER_JOB = 1000
AUTO_DEFAULT_MAX = 8


@dataclass(frozen=True, slots=True)
class PackSpec:
    per_gpu: int = 1  # fixed tasks per GPU (`auto`: the most it may choose)
    per_job: int = 1  # tasks one Slurm job runs
    auto: bool = False  # per_gpu chosen from measured use, up to `per_gpu`
    cpus: int = 0  # a pack's CPUs, its tasks' steps sharing them (0: auto's measure, else all the tasks' own)
    processes: int = 0  # tasks run at once as plain processes, no step each (0: every task its own step)

    def to_settings(self) -> dict[str, object]:
        return {"per_gpu": self.per_gpu, "per_job": self.per_job, "auto": self.auto, "cpus": self.cpus,
                **({"processes": self.processes} if self.processes else {})}


def read_pack(r: Reader, resources: Resources, has_profile: bool) -> PackSpec | None:
    value = r.get(("pack",))
    if value is None or value is Reader.MISSING:
        return None
    pack: PackSpec | None
    if value == "auto":
        pack = PackSpec(per_gpu=AUTO_DEFAULT_MAX, auto=True)
    elif isinstance(value, dict):
        pack = _pack_mapping(r, value)
    else:
        r.problem(("pack",), "must be auto, {per_gpu: N}, {per_job: K} or {auto: {max_per_gpu: N}}")
        return None
    return pack if pack is not None and _fits(r, pack, resources, has_profile) else None


def _pack_mapping(r: Reader, value: dict) -> PackSpec | None:
    r.mapping(("pack",), PACK_KEYS)
    if "auto" in value and "per_gpu" in value:
        r.problem(("pack",), "per_gpu fixes the tasks per GPU and auto chooses them: give one")
        return None
    per_job = r.integer(("pack", "per_job"), 2, MAX_PER_JOB, default=1) or 1
    cpus = r.integer(("pack", "cpus"), 1, MAX_PER_JOB, default=0) or 0
    processes = r.integer(("pack", "processes"), 1, MAX_PER_JOB, default=0) or 0
    if processes and ("auto" in value or per_job < 2 or processes > per_job):
        r.problem(("pack", "processes"), f"runs {processes} of a job's tasks at once: it needs per_job (2 or more "
                                         f"tasks to a job, at least {processes}) and no auto")
        return None
    if "auto" in value:
        auto = value["auto"]
        if auto is True:
            return PackSpec(AUTO_DEFAULT_MAX, per_job, auto=True, cpus=cpus)
        if not isinstance(auto, dict):
            r.problem(("pack", "auto"), "must be true or {max_per_gpu: N}")
            return None
        r.mapping(("pack", "auto"), AUTO_KEYS)
        most = r.integer(("pack", "auto", "max_per_gpu"), 2, MAX_PER_GPU, default=AUTO_DEFAULT_MAX)
        return PackSpec(most or AUTO_DEFAULT_MAX, per_job, auto=True, cpus=cpus)
    per_gpu = r.integer(("pack", "per_gpu"), 2, MAX_PER_GPU, default=1) or 1
    if per_gpu == 1 and per_job == 1:
        r.problem(("pack",), "give per_gpu (2 or more tasks per GPU) or per_job (2 or more tasks per job)")
        return None
    return PackSpec(per_gpu, per_job, cpus=cpus, processes=processes)


def _fits(r: Reader, pack: PackSpec, resources: Resources, has_profile: bool) -> bool:
    if resources.nodes > 1:
        r.problem(("pack",), f"a task spans {resources.nodes} nodes: multi-node tasks are never packed")
        return False
    if (pack.per_gpu > 1 or pack.auto) and resources.gpus > 1:
        r.problem(("pack",), f"packing tasks onto a GPU needs tasks of exactly one GPU (resources.gpus is "
                             f"{resources.gpus}); per_job packs tasks without sharing GPUs")
        return False
    if pack.per_gpu > 1 and not pack.auto and resources.gpus != 1:
        r.problem(("pack",), "per_gpu shares GPUs: it needs tasks of exactly one GPU (resources.gpus is 0); "
                             "per_job packs tasks without GPUs")
        return False
    if pack.cpus and pack.cpus < resources.cpus_per_task:
        r.problem(("pack", "cpus"), f"a pack's CPUs ({pack.cpus}) must hold one task's cpus_per_task "
                                    f"({resources.cpus_per_task}): each task's step asks for that many")
        return False
    if pack.auto and not has_profile:
        r.problem(("pack",), "auto chooses from the profile's history: give the spec a profile: (e.g. "
                             "profile: my-sweep) and run a first campaign of it unpacked")
        return False
    return True
