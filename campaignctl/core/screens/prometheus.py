"""Campaign metrics in the Prometheus text exposition format, version 0.0.4 (what node_exporter's
textfile collector reads). Pure.

    # HELP campaignctl_tasks Tasks by the state of their latest attempt, as the last reconcile saw it.
    # TYPE campaignctl_tasks gauge
    campaignctl_tasks{campaign="lr-sweep",state="RUNNING"} 3

Label values escape backslash, double quote and line feed as `\\\\`, `\\"` and `\\n`; HELP text
escapes backslash and line feed. Each family is written whole, once; a family with no sample is
left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from campaignctl.core.screens.stall import TickHealth
from campaignctl.core.usage.cost import DIMENSIONS
from campaignctl.core.usage.telemetry import Sample

CONTENT_TYPE = "text/plain; version=0.0.4"

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    kind: str  # gauge | counter
    help: str
    samples: tuple[tuple[Labels, float], ...] = ()


@dataclass(frozen=True, slots=True)
class CampaignSnapshot:
    """One campaign as the store has it after the last tick."""

    name: str
    state: str  # active | paused | finished
    tasks: Mapping[str, int]  # latest attempt's state → tasks
    attempts: int
    spend: Mapping[str, Mapping[str, float]]  # spent | committed | projected → dimension → amount
    limits: Mapping[str, float]  # the budget's set dimensions
    exhausted: bool
    decisions: Mapping[tuple[str, str, str], int]  # (rule, action, mode) → decisions
    gpu_util_pct: Mapping[int, float] = field(default_factory=dict)  # running task → recent mean
    cpu_pct: Mapping[int, float] = field(default_factory=dict)  # running task → recent mean, % of one core


def recent_use(window: Sequence[Sample]) -> tuple[float | None, float]:
    """Mean GPU utilisation (None without GPU samples) and mean CPU % of one core of a window."""
    gpu = [s.gpu_util_pct for s in window if s.gpu_util_pct is not None]
    return (sum(gpu) / len(gpu) if gpu else None), sum(s.cpu_pct for s in window) / max(1, len(window))


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def exposition(families: Iterable[Family]) -> str:
    lines = []
    for f in families:
        if not f.samples:
            continue
        lines += [f"# HELP {f.name} {escape_help(f.help)}", f"# TYPE {f.name} {f.kind}"]
        for labels, value in f.samples:
            text = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
            lines.append(f"{f.name}{{{text}}} {format_value(value)}" if text else f"{f.name} {format_value(value)}")
    return "".join(line + "\n" for line in lines)


P = "campaignctl_"
FAMILIES: dict[str, tuple[str, str, str]] = {  # key → (name, type, help)
    "state": (P + "campaign_state", "gauge", "1 for the campaign's state: active, paused or finished."),
    "tasks": (P + "tasks", "gauge", "Tasks by the state of their latest attempt, as the last reconcile saw it."),
    "attempts": (P + "attempts_total", "counter", "Attempts submitted, retries included."),
    **{f"spend_{d}": (f"{P}spend_{d}", "gauge", f"Spend in {d}: spent so far, committed by running attempts "
                      "up to their time limit, projected for pending ones (label kind).") for d in DIMENSIONS},
    "spend_energy_kwh": (P + "spend_energy_kwh", "gauge", "Energy in kWh: spent is measured (sacct ConsumedEnergy "
                         "where Slurm accounts it, else the GPUs' NVML power integrated), committed and projected "
                         "are at the campaign's measured energy per attempt-hour (label kind)."),
    **{f"budget_{d}": (f"{P}budget_{d}", "gauge", f"The campaign's budget in {d}.") for d in DIMENSIONS},
    "exhausted": (P + "budget_exhausted", "gauge", "1 when the budget cannot pay for another attempt."),
    "decisions": (P + "decisions_total", "counter", "Decisions in the log by rule, action and mode (enforce, "
                  "or shadow for proposals)."),
    "gpu": (P + "task_gpu_util_pct", "gauge", "Mean GPU utilisation of a running task over the policy's "
            "utilisation window, from its telemetry."),
    "cpu": (P + "task_cpu_pct", "gauge", "Mean CPU use of a running task's processes over the policy's "
            "utilisation window, in % of one core."),
    "tick": (P + "last_reconcile_timestamp_seconds", "gauge", "When the last reconcile tick that observed "
             "Slurm finished (Unix time)."),
    "stalled": (P + "reconcile_stalled", "gauge", "1 when the reconcile lock has been held, or no tick has "
                "observed Slurm, for longer than reconcile_stall_after_seconds."),
    "stall_after": (P + "reconcile_stall_after_seconds", "gauge", "How long a tick may hold the lock, or ticks "
                    "may fail, before reconcile counts as stalled (3 cron intervals or CAMPAIGNCTL_STALL_AFTER)."),
    "held": (P + "reconcile_lock_held_seconds", "gauge", "For how long the running reconcile has held the lock."),
}
Add = Callable[..., None]


def campaign_families(snapshots: Sequence[CampaignSnapshot], last_tick: float | None,
                      ticks: TickHealth | None = None) -> list[Family]:
    """Every family, in a fixed order, with the samples of every campaign (and the control
    loop's health, `ticks`)."""
    samples: dict[str, list[tuple[Labels, float]]] = {key: [] for key in FAMILIES}

    def add(key: str, value: float, **labels: str) -> None:
        samples[key].append((tuple(labels.items()), float(value)))

    for s in snapshots:
        _add_campaign(add, s)
    if last_tick is not None:
        add("tick", last_tick)
    if ticks is not None:
        add("stalled", int(ticks.stalled))
        add("stall_after", ticks.stall_after_s)
        if ticks.held_s is not None:
            add("held", ticks.held_s)
    return [Family(name, kind, text, tuple(samples[key])) for key, (name, kind, text) in FAMILIES.items()]


def _add_campaign(add: Add, s: CampaignSnapshot) -> None:
    c = s.name
    add("state", 1, campaign=c, state=s.state)
    for state, n in sorted(s.tasks.items()):
        add("tasks", n, campaign=c, state=state)
    add("attempts", s.attempts, campaign=c)
    for kind, amounts in s.spend.items():
        for dim, value in amounts.items():
            add(f"spend_{dim}", value, campaign=c, kind=kind)
    for dim, limit in s.limits.items():
        add(f"budget_{dim}", limit, campaign=c)
    add("exhausted", int(s.exhausted), campaign=c)
    for (rule, action, mode), n in sorted(s.decisions.items()):
        add("decisions", n, campaign=c, rule=rule, action=action, mode=mode)
    for task, value in sorted(s.gpu_util_pct.items()):
        add("gpu", value, campaign=c, task=str(task))
    for task, value in sorted(s.cpu_pct.items()):
        add("cpu", value, campaign=c, task=str(task))
