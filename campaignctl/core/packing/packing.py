"""How a submission's small tasks are packed: `pack: {per_gpu, per_job}` as the spec says, or
`pack: auto`, tasks per GPU chosen from what earlier attempts of the same profile group were
measured to use — the group's p95 peak GPU memory against the GPU's memory, and its mean GPU
utilisation against the whole GPU, each with headroom, never above what the spec allows — and
the pack's CPUs from the group's mean CPU use. Pure: the samples come from the profile store
(adapters/profile_store.py), as right-sizing reads them; the choice is logged as a decision.

A GPU's memory is the hard limit: tasks that share it and together ask for more than it holds
fail with CUDA out of memory. Utilisation is the soft one: tasks that together want more than
one GPU's compute still run, only slower each, so past it packing stops paying. NVML reports
both per device; a task's own GPU memory is what its processes hold (core/usage/telemetry.py).

Short tasks: where the group's completed attempts ran a median under SHORT_S, `auto` runs them as
plain processes (core/pack_plan.py): as many at once as it would have packed side by side (GPU
tasks) or as the pack's `cpus` hold (CPU tasks), and as many rounds of them to a job as fit
ELEMENT_TARGET_S at the tasks' time limit (an element's limit is its rounds' limits: a task that
used its whole limit must not cut the rest short; right_size lowers a generous limit) — a step, an
accounting row and a scheduling pass per task cost more than such a task runs.

I/O-bound groups: where most of the group's measured completed attempts (MIN_SAMPLES or more with
a bottleneck label, core/usage/bottleneck.py) were I/O-bound, `auto` never runs two of its tasks
side by side — not on one GPU, not as plain processes at once: they would share one node's
filesystem client and disks, each then slower, and the pack no faster than one after another."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from campaignctl.core.decisions.action_records import PackTasks
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.resources import Resources
from campaignctl.core.spec.pack_spec import MAX_PER_JOB, PackSpec
from campaignctl.core.tick.right_size import UsageSample, quantile

RULE = ACTION = "pack"  # record-only: how a submission's first attempts were packed
HEADROOM = 0.2  # plan for at most 80 % of a GPU's memory, of its compute, and of the pack's CPUs
MIN_SAMPLES = 3  # fewer ended attempts measured on a GPU: no packing from history
GPU_MEM_QUANTILE = 0.95
SHORT_S = 60  # a median run shorter than this: too small for a step each
ELEMENT_TARGET_S = 1800  # a plain-process pack's element aims at half an hour


@dataclass(frozen=True, slots=True)
class Measured:
    """What a group's ended attempts used on their GPU (None: not measured)."""

    samples: int  # ended attempts with GPU telemetry
    gpu_mem_peak_mb: float | None  # the GPU_MEM_QUANTILE of their peaks
    gpu_mem_total_mb: float | None  # the GPU's memory, as NVML reported it
    gpu_util_mean_pct: float | None  # the mean of their mean utilisations
    cpu_mean_pct: float | None = None  # the mean of their mean CPU use (100: one busy CPU)


@dataclass(frozen=True, slots=True)
class Packing:
    per_gpu: int  # tasks sharing one GPU (1: not packed)
    why: str  # one sentence: which limit bound it
    evidence: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PackChoice:
    shape: PackShape | None  # None: not packed
    why: str
    evidence: Mapping[str, object] = field(default_factory=dict)


def measured(samples: Sequence[UsageSample]) -> Measured:
    """The group's attempts that ended COMPLETED with a GPU memory reading."""
    done = [s for s in samples if s.state == "COMPLETED" and s.gpu_mem_mb is not None]
    peaks = [s.gpu_mem_mb for s in done if s.gpu_mem_mb is not None]
    totals = [s.gpu_mem_total_mb for s in done if s.gpu_mem_total_mb]
    utils = [s.gpu_util_pct for s in done if s.gpu_util_pct is not None]
    cpus = [s.cpu_pct for s in done if s.cpu_pct is not None]
    return Measured(len(peaks), quantile(peaks, GPU_MEM_QUANTILE) if peaks else None, min(totals) if totals else None,
                    sum(utils) / len(utils) if utils else None, sum(cpus) / len(cpus) if cpus else None)


def choose_per_gpu(m: Measured, allowed: int, headroom: float = HEADROOM) -> Packing:
    """Tasks per GPU: the fewest that GPU memory and compute admit, at most `allowed` (the spec's)."""
    evidence: dict[str, object] = {"samples": m.samples, "gpu_mem_peak_mb": m.gpu_mem_peak_mb,
                                   "gpu_mem_total_mb": m.gpu_mem_total_mb, "gpu_util_mean_pct": m.gpu_util_mean_pct,
                                   "cpu_mean_pct": m.cpu_mean_pct, "headroom": headroom, "allowed": allowed}
    if allowed <= 1:
        return Packing(1, "the spec allows one task per GPU", evidence)
    if m.samples < MIN_SAMPLES or not m.gpu_mem_peak_mb or not m.gpu_mem_total_mb:
        return Packing(1, f"{m.samples} ended attempt(s) of the group measured on a GPU, fewer than "
                          f"{MIN_SAMPLES}: not packed until more have run", evidence)
    by_memory = math.floor(m.gpu_mem_total_mb * (1 - headroom) / m.gpu_mem_peak_mb)
    by_compute = math.floor(100 * (1 - headroom) / m.gpu_util_mean_pct) if m.gpu_util_mean_pct else allowed
    limits = {"GPU memory": by_memory, "GPU compute": by_compute, "the spec": allowed}
    binding = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    per_gpu = max(1, limits[binding])
    evidence.update(by_memory=by_memory, by_compute=by_compute)
    return Packing(per_gpu, f"{per_gpu} per GPU, bound by {binding}: p95 peak {m.gpu_mem_peak_mb:.0f} MB of "
                            f"{m.gpu_mem_total_mb:.0f} MB, mean utilisation "
                            + (f"{m.gpu_util_mean_pct:.0f} %" if m.gpu_util_mean_pct is not None else "unknown")
                            + f", {headroom:.0%} kept free", evidence)


def choose_shape(spec: PackSpec, each: Resources, samples: Sequence[UsageSample]) -> PackChoice:
    """The shape of a group's packs: the spec's, or (auto) from the group's measured use."""
    if not spec.auto:
        shape = PackShape(spec.per_job if spec.per_job > 1 else spec.per_gpu, spec.per_gpu, spec.cpus, spec.processes)
        return PackChoice(shape, f"{_describe(shape)}, as the spec's pack: says", {"spec": spec.to_settings()})
    m = measured(samples)
    apart = io_bound(samples)
    packing = Packing(1, apart[0], apart[1]) if apart is not None else \
        choose_per_gpu(m, spec.per_gpu) if each.gpus else Packing(1, "CPU tasks share no GPU", {})
    short = _short_runs(samples)
    if short is not None:
        return _plain_processes(spec, each, packing, short, m)
    if apart is not None:  # a job's tasks run at once, on one node
        return PackChoice(None, f"not packed: {apart[0]}", apart[1])
    if not each.gpus:
        return PackChoice(None, "not packed: CPU tasks are packed by `auto` only when they are short (a median "
                                f"run under {SHORT_S} s over {MIN_SAMPLES} or more completed attempts)",
                          {"samples": sum(s.state == "COMPLETED" for s in samples)})
    per_element = spec.per_job if spec.per_job > 1 else packing.per_gpu
    if per_element <= 1:
        return PackChoice(None, f"not packed: {packing.why}", packing.evidence)
    cpus = spec.cpus or _cpus(m, each, per_element)
    shape = PackShape(per_element, packing.per_gpu, cpus)
    return PackChoice(shape, f"{_describe(shape)}: {packing.why}", {**packing.evidence, "cpus": cpus})


def io_bound(samples: Sequence[UsageSample]) -> tuple[str, dict[str, object]] | None:
    """(why, evidence) when most of the group's completed attempts that have a label were I/O-bound."""
    labelled = [s.bottleneck for s in samples if s.state == "COMPLETED" and s.bottleneck is not None]
    found = labelled.count("io")
    if len(labelled) < MIN_SAMPLES or 2 * found <= len(labelled):
        return None
    return (f"{found} of {len(labelled)} measured attempts of the group were I/O-bound: two side by side "
            "would share one node's I/O, so none is", {"io_bound": found, "labelled": len(labelled)})


def _short_runs(samples: Sequence[UsageSample]) -> tuple[float, float, int] | None:
    """(median, p95, count) of the completed attempts' run times when enough of them ran a
    median under SHORT_S; None otherwise."""
    runs = sorted(float(s.elapsed_s) for s in samples if s.state == "COMPLETED" and s.elapsed_s is not None)
    if len(runs) < MIN_SAMPLES or quantile(runs, 0.5) >= SHORT_S:
        return None
    return quantile(runs, 0.5), quantile(runs, GPU_MEM_QUANTILE), len(runs)


def _plain_processes(spec: PackSpec, each: Resources, packing: Packing,
                     short: tuple[float, float, int], m: Measured) -> PackChoice:
    median, p95, count = short
    cpus = spec.cpus or each.cpus_per_task
    at_once = 1 if packing.evidence.get("io_bound") else packing.per_gpu if each.gpus else \
        max(1, cpus // each.cpus_per_task)
    rounds = max(1, ELEMENT_TARGET_S // (each.time_min * 60))
    per_job = min(MAX_PER_JOB, max(2, at_once * rounds))
    if spec.per_job > 1:
        per_job = spec.per_job
    at_once = min(at_once, per_job)
    if each.gpus:  # the CPUs the tasks at once were seen using, as for tasks side by side
        cpus = spec.cpus or _cpus(m, each, at_once) or each.cpus_per_task * at_once
    shape = PackShape(per_job, packing.per_gpu if each.gpus else 1, cpus if each.gpus else spec.cpus, at_once)
    why = (f"median run {median:.0f} s (p95 {p95:.0f} s) over {count} completed attempts, under {SHORT_S} s: "
           f"too short for a job step each; {at_once} at a time"
           + (f" ({packing.why})" if each.gpus or packing.evidence.get("io_bound") else "")
           + f" on {cpus} CPU{'s' if cpus > 1 else ''}"
           + f", {per_job // at_once} round{'s' if per_job // at_once > 1 else ''} of {each.time_min} min to a job")
    return PackChoice(shape, f"{_describe(shape)}: {why}", {**packing.evidence, "median_run_s": median,
                                                           "p95_run_s": p95, "completed": count})


def _cpus(m: Measured, each: Resources, per_element: int) -> int:
    """A pack's CPUs from its tasks' measured mean use, with headroom: at least one task's
    request, at most all of theirs (0: all of theirs, unmeasured)."""
    if m.cpu_mean_pct is None:
        return 0
    need = math.ceil(per_element * m.cpu_mean_pct / 100 / (1 - HEADROOM))
    return min(max(need, each.cpus_per_task), each.cpus_per_task * per_element)


def _describe(shape: PackShape) -> str:
    gpus = f"{shape.per_gpu} per GPU, " if shape.per_gpu > 1 else ""
    cpus = f", {shape.cpus} CPU{'s' if shape.cpus > 1 else ''} to a job" if shape.cpus else ""
    inline = f", {shape.processes} at a time as plain processes" if shape.processes else ""
    return f"packed {gpus}{shape.per_element} tasks to a job{cpus}{inline}"


# changes Slurm makes to a whole array element (`scontrol update`, `scancel` of the element): on a
# pack they would resize or cancel every task it runs, and its steps' own limits were fixed at submit
ELEMENT_WIDE = ("resize_pending", "cancel")


def own_decisions(decisions: Sequence[Decision], views: Sequence[TaskView]) -> list[Decision]:
    """`decisions` less those that would change a packed attempt's whole element: a pending pack
    is never resized or moved for one of its tasks (the task's retry, alone, gets the change).
    A stop of a packed task stays: it ends that task's step only (services/act.py)."""
    packed = {a.token for v in views for a in v.attempts if a.packed}
    if not packed:
        return list(decisions)
    return [d for d in decisions if not (d.action in ELEMENT_WIDE and d.attempt_token in packed)]


def pack_decision(token: str, tasks: Sequence[int], group: str, choice: PackChoice) -> Decision:
    """The record of how a submission was packed (or why not), logged before its sbatch."""
    shape = choice.shape or PackShape(1)
    return Decision(tasks[0], f"{token}.0", RULE, ACTION, f"{group or 'all tasks'}: {choice.why}",
                    dict(choice.evidence), PackTasks(tasks=tuple(tasks), group=group, per_gpu=shape.per_gpu,
                                                     per_element=shape.per_element, cpus=shape.cpus,
                                                     processes=shape.processes or None))
