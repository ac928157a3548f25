"""Utilisation rules: from a running attempt's recent telemetry window to a resize. Pure.

- data-starved: GPUs below `gpu_low_pct` while the CPUs run at `cpu_busy_pct` of what the task
  has: the input pipeline is the bottleneck → more CPUs for the task's next attempt and for its
  pending array siblings (`scontrol update NumCPUs`), up to `max_cpus`;
- GPU-idle: GPUs below `gpu_low_pct` and CPUs below `cpu_idle_pct` → fewer GPUs for the next
  attempt (never below the spec's `min_gpus`), or, with `cancel_running`, cancel the attempt now
  and resubmit it with fewer GPUs (the resubmission happens when sacct shows it CANCELLED).
A window must be covered (samples over at least 80 % of it, 3 or more) and every sample in it
must have GPU figures: no decision on missing data. Each rule fires once per attempt.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from campaignctl.core.decisions.action_records import Cancel, Pair, ResizeNext, ResizePending
from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.policy.policy import Policy
from campaignctl.core.policy.policy_sections import Utilisation
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.telemetry import Summary

MIN_SAMPLES = 3
COVERAGE = 0.8
DATA_STARVED, GPU_IDLE = "data_starved", "gpu_idle"


@dataclass(frozen=True, slots=True)
class Window:
    samples: int
    span_s: float
    cpu_mean_pct: float  # % of one core, summed over the process tree
    gpu_mean_pct: float | None  # None when any sample lacks GPU figures

    def to_dict(self) -> dict[str, object]:
        return {"samples": self.samples, "span_s": round(self.span_s, 1), "cpu_mean_pct": round(self.cpu_mean_pct, 1),
                "gpu_mean_pct": None if self.gpu_mean_pct is None else round(self.gpu_mean_pct, 1)}


def window_of(summary: Summary, seconds: float) -> Window | None:
    """The last `seconds` of samples, or None if they do not cover the window yet."""
    samples = summary.window(seconds)
    if len(samples) < MIN_SAMPLES or samples[-1].t - samples[0].t < COVERAGE * seconds:
        return None
    gpu = [s.gpu_util_pct for s in samples if s.gpu_util_pct is not None]
    return Window(len(samples), samples[-1].t - samples[0].t, sum(s.cpu_pct for s in samples) / len(samples),
                  sum(gpu) / len(gpu) if len(gpu) == len(samples) else None)


def classify(window: Window, resources: Resources, u: Utilisation) -> str | None:
    """data_starved, gpu_idle or None; only for a task with GPUs whose window has GPU figures.
    Never for a multi-process attempt: its window is the first node's first process tree (one
    rank, or torchrun's whole node against one process's CPUs), and fewer GPUs per node would
    break its one-process-per-GPU layout."""
    if resources.distributed:
        return None
    if not resources.gpus or window.gpu_mean_pct is None or window.gpu_mean_pct >= u.gpu_low_pct:
        return None
    capacity = 100.0 * resources.cpus_per_task
    if window.cpu_mean_pct >= u.cpu_busy_pct / 100 * capacity:
        return DATA_STARVED
    if window.cpu_mean_pct <= u.cpu_idle_pct / 100 * capacity:
        return GPU_IDLE
    return None


def decide_utilisation(views: Sequence[TaskView], summaries: Mapping[str, Summary], policy: Policy,
                       min_gpus: int, already: Collection[tuple[str, str]]) -> list[Decision]:
    """`summaries` by attempt token; `already` holds (token, rule) pairs decided on earlier ticks."""
    u = policy.utilisation
    if not u.enabled:
        return []
    out: list[Decision] = []
    for view in views:
        latest = view.latest
        summary = summaries.get(latest.token)
        if latest.state != "RUNNING" or summary is None:
            continue
        window = window_of(summary, u.window_s)
        kind = classify(window, latest.resources, u) if window else None
        if kind is None or (latest.token, kind) in already or window is None:
            continue
        if kind == DATA_STARVED and u.data_starved.action == "more_cpus":
            out += _more_cpus(view, window, policy, views)
        elif kind == GPU_IDLE and u.gpu_idle.action == "fewer_gpus":
            out += _fewer_gpus(view, window, policy, min_gpus)
    return out


def _evidence(latest: AttemptView, window: Window, u: Utilisation) -> dict[str, object]:
    r = latest.resources
    return {"job_id": latest.job_id, "attempt": latest.number, "state": latest.state,
            "window": {**window.to_dict(), "window_s": u.window_s}, "cpus_per_task": r.cpus_per_task,
            "gpus": r.gpus, "gpu_type": r.gpu_type,
            "thresholds": {"gpu_low_pct": u.gpu_low_pct, "cpu_busy_pct": u.cpu_busy_pct,
                           "cpu_idle_pct": u.cpu_idle_pct}}


def _more_cpus(view: TaskView, window: Window, policy: Policy, views: Sequence[TaskView]) -> list[Decision]:
    rule, latest = policy.utilisation.data_starved, view.latest
    old = latest.resources.cpus_per_task
    new = min(rule.max_cpus, math.ceil(round(old * rule.cpu_factor, 6)))
    if new <= old:
        return []
    inputs = _evidence(latest, window, policy.utilisation)
    seen = (f"GPUs at {window.gpu_mean_pct:.0f}% while CPUs ran at {window.cpu_mean_pct:.0f}% of one core "
            f"({old} allocated) over {window.span_s:.0f} s")
    resources = replace(latest.resources, cpus_per_task=new)
    out = [Decision(view.index, latest.token, DATA_STARVED, "resize_next",
                    f"data-starved: {seen}; the next attempt gets cpus_per_task {old} → {new}.",
                    inputs, ResizeNext(changes={"cpus_per_task": (old, new)}), resources)]
    if not rule.resize_pending:
        return out
    for sibling in views:
        s = sibling.latest
        if s.state == "PENDING" and s.array_job_id == latest.array_job_id and s.resources.cpus_per_task < new:
            grown = replace(s.resources, cpus_per_task=new)
            out.append(Decision(
                sibling.index, s.token, DATA_STARVED, "resize_pending",
                f"pending sibling of task {view.index}, which is data-starved ({seen}); "
                f"cpus_per_task {s.resources.cpus_per_task} → {new} before it starts.",
                {"job_id": s.job_id, "state": s.state, "trigger_task": view.index, "trigger_attempt": latest.token,
                 "window": inputs["window"]},
                ResizePending(changes={"cpus_per_task": (s.resources.cpus_per_task, new)},
                              array_job_id=s.array_job_id or "", resources=grown), grown))
    return out


def _fewer_gpus(view: TaskView, window: Window, policy: Policy, min_gpus: int) -> list[Decision]:
    rule, latest = policy.utilisation.gpu_idle, view.latest
    old = latest.resources.gpus
    new = max(min_gpus, 1 if old else 0, math.floor(old * rule.gpu_factor))
    if new >= old:
        return []
    seen = (f"GPUs at {window.gpu_mean_pct:.0f}% and CPUs at {window.cpu_mean_pct:.0f}% of one core "
            f"over {window.span_s:.0f} s")
    resources = replace(latest.resources, gpus=new)
    changes: dict[str, Pair] = {"gpus": (old, new)}
    inputs = _evidence(latest, window, policy.utilisation)
    if rule.cancel_running:
        return [Decision(view.index, latest.token, GPU_IDLE, "cancel",
                         f"GPU-idle: {seen}; cancelling it to resubmit with gpus {old} → {new}.",
                         inputs, Cancel(changes=changes, replacement=resources, only_if="RUNNING"), resources)]
    return [Decision(view.index, latest.token, GPU_IDLE, "resize_next",
                     f"GPU-idle: {seen}; the next attempt gets gpus {old} → {new}.", inputs,
                     ResizeNext(changes=changes), resources)]


# `status` says so when a task has run this long, its CPUs busy, and its output is still empty
SILENT_AFTER_S = 120
SILENT_CPU_PCT = 20.0  # mean CPU use (% of one CPU) that counts as working


def silent_while_working(state: str, elapsed_s: int | None, cpu_mean_pct: float | None,
                         gpu_util_mean_pct: float | None) -> bool:
    """A running attempt whose telemetry shows work (CPU or GPU busy) for SILENT_AFTER_S: if its
    output is empty, its program buffers what it prints (C stdio and Python both block-buffer a
    file) and live metrics from output, early stopping and `output -f` see nothing until it exits."""
    busy = (cpu_mean_pct or 0.0) >= SILENT_CPU_PCT or (gpu_util_mean_pct or 0.0) >= SILENT_CPU_PCT
    return state == "RUNNING" and (elapsed_s or 0) >= SILENT_AFTER_S and busy

