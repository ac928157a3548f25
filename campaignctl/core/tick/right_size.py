"""Right-sizing from history: what a kind of work (a spec's `profile:`) really used, and the
memory and time limits that follow from it. Pure.

    right_size: {mem: {quantile: 0.95, margin: 1.2}, time: {quantile: 0.95, margin: 1.3},
                 min_samples: 5, lower: true, raise: true, mode: shadow}

A sample is one ended attempt of the profile: COMPLETED gives its peak memory (the largest of
sacct MaxRSS, the sampler's RSS and its memory cgroup's working set: adapters/profile_store.py)
and elapsed time; OUT_OF_MEMORY says the task needed at least its
memory limit, TIMEOUT at least its time limit, so such an attempt counts with that limit (and a
right-sized attempt that failed so raises the next proposal: the profile learns from it).
Samples are grouped by rung, and by the parameters `profile: {name: p, by: [model]}` names.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from campaignctl.core.decisions.action_records import ResizePending, SizeFirst
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.packing.profile import group_of
from campaignctl.core.policy.right_size_section import RightSize
from campaignctl.core.resources import Resources
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.tuning.ladder import rung_of

RULE = "right_size"
SIZE_FIRST = "size_first"  # record-only: how a submission's first attempts were sized
ENDED = ("COMPLETED", "OUT_OF_MEMORY", "TIMEOUT")
MEM_STEP_MB = 64  # proposals are rounded up to whole 64M (sbatch --mem takes megabytes)
MIN_TIME_MIN = 2  # slurmctld checks limits every 30 s and a job's start-up is not in a short sample
# The least memory right_size asks: never `--mem=0`, which Slurm reads as all of the node's memory
MIN_MEM_MB = 128
# A peak above twice what the attempt was allowed (its cgroup limit; MaxRSS can count shared pages
# twice) is not a measurement; with no limit asked (`--mem=0`: the node's), above the largest node
MAX_PEAK_FACTOR = 2
MAX_NODE_MEM_MB = 64 * 2**20  # 64 TiB


def plausible_peak(rss_mb: float | None, asked_mem_mb: int) -> bool:
    """Whether a sample's peak memory can be believed: finite, positive, within what the attempt
    could hold. A job, or anyone writing its attempt directory, can write any number into its
    telemetry; a profile pools every user's campaigns in a shared database."""
    bound = MAX_PEAK_FACTOR * asked_mem_mb if asked_mem_mb > 0 else MAX_NODE_MEM_MB
    return rss_mb is not None and math.isfinite(rss_mb) and 0 < rss_mb <= bound


@dataclass(frozen=True, slots=True)
class UsageSample:
    """One ended attempt of a profile, as the store holds it."""

    campaign: str
    group: str  # rung and `by` parameters, e.g. "rung 0, model=gpt2"
    state: str  # COMPLETED | OUT_OF_MEMORY | TIMEOUT
    rss_mb: float | None  # peak: RSS, or the cgroup's working set where larger
    elapsed_s: int | None
    requested: Resources
    gpu_mem_mb: float | None = None
    cpu_pct: float | None = None  # mean over the attempt, of one CPU (200: two busy CPUs)
    gpu_mem_total_mb: float | None = None  # its GPUs' memory, as NVML reported it
    gpu_util_pct: float | None = None  # mean GPU utilisation over the attempt
    right_sized: bool = False  # its limits came from a right_size decision
    bottleneck: str | None = None  # what held it back (core/usage/bottleneck.py); None: no telemetry

    @property
    def mem_need_mb(self) -> float | None:
        if self.state == "OUT_OF_MEMORY":
            return max(self.rss_mb or 0.0, float(self.requested.mem_mb))
        return self.rss_mb

    @property
    def time_need_s(self) -> int | None:
        if self.state == "TIMEOUT":
            return max(self.elapsed_s or 0, self.requested.time_min * 60)
        return self.elapsed_s if self.state == "COMPLETED" else None

    @property
    def wrong(self) -> bool:
        """Right-sized, then killed at the limit right-sizing chose."""
        return self.right_sized and self.state in ("OUT_OF_MEMORY", "TIMEOUT")


@dataclass(frozen=True, slots=True)
class Sizing:
    """What right-sizing asks for a group's tasks, with its evidence."""

    mem_mb: int
    time_min: int
    evidence: Mapping[str, object]

    def apply(self, asked: Resources) -> Resources:
        return replace(asked, mem_mb=self.mem_mb, time_min=self.time_min)


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (a value that was seen, never interpolated below it)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def propose(samples: Sequence[UsageSample], section: RightSize, asked: Resources,
            mem_cap_mb: int | None = None, time_cap_min: int | None = None) -> Sizing | None:
    """Memory and time for a task asking `asked`, from its group's samples; None with fewer
    than min_samples of either. Within [spec, cap] per `lower`/`raise`."""
    mem = [v for s in samples if (v := s.mem_need_mb) is not None]
    time = [float(v) for s in samples if (v := s.time_need_s) is not None]
    if min(len(mem), len(time)) < section.min_samples:
        return None
    mem_q, time_q = quantile(mem, section.mem.quantile), quantile(time, section.time.quantile)
    mem_mb = _bounded(max(MIN_MEM_MB, MEM_STEP_MB * math.ceil(mem_q * section.mem.margin / MEM_STEP_MB)),
                      asked.mem_mb, mem_cap_mb, section)
    time_min = _bounded(max(MIN_TIME_MIN, math.ceil(time_q * section.time.margin / 60)),
                        asked.time_min, time_cap_min, section)
    evidence = {"samples": len(mem), "time_samples": len(time), "campaigns": sorted({s.campaign for s in samples}),
                "mem_quantile": section.mem.quantile, "mem_margin": section.mem.margin, "rss_q_mb": round(mem_q, 1),
                "time_quantile": section.time.quantile, "time_margin": section.time.margin,
                "elapsed_q_s": round(time_q), "asked": {"mem_mb": asked.mem_mb, "time_min": asked.time_min},
                "proposed": {"mem_mb": mem_mb, "time_min": time_min},
                # how often a limit right_size chose was too small: the attempt ended OOM/TIMEOUT
                "right_sized": sum(s.right_sized for s in samples), "wrong": sum(s.wrong for s in samples),
                **_held_back(samples)}
    return Sizing(mem_mb, time_min, evidence)


def _held_back(samples: Sequence[UsageSample]) -> dict[str, object]:
    """What held the group's attempts back (core/usage/bottleneck.py), and, where most were bound
    by I/O or communication, why their GPUs stay as asked: right_size sizes memory and time and
    never adds GPUs, and a GPU more would wait on the same I/O."""
    labels = Counter(s.bottleneck for s in samples if s.bottleneck is not None)
    if not labels:
        return {}
    label, count = labels.most_common(1)[0]
    what = "I/O" if label == "io" else "network"
    kept = {"gpus": f"kept as asked: {count} of {sum(labels.values())} attempts of the group were bound by "
                    f"{'I/O' if label == 'io' else 'communication'}; more GPUs would wait on the same {what}"} \
        if label in ("io", "communication") and 2 * count > sum(labels.values()) else {}
    return {"bottlenecks": dict(sorted(labels.items())), **kept}


def _bounded(value: int, asked: int, cap: int | None, section: RightSize) -> int:
    if not section.lower:
        value = max(value, asked)
    if not section.raise_:
        value = min(value, asked)
    return min(value, max(cap, asked)) if cap else value


def plan_lowering(views: Sequence[TaskView], samples: Sequence[UsageSample], section: RightSize,
                  group_of_task: Mapping[int, str], lowered: Collection[str]) -> list[Decision]:
    """Pending attempts whose memory or time limit is above what the campaign's own ended
    attempts of their group call for: one `resize_pending` each (the Actor sends one scontrol
    update per array). Lowering only: a pending job's limits are never raised in place.
    `samples`: this campaign's; `group_of_task`: task index → group; `lowered`: attempt tokens
    right_size already resized, left alone so a limit moves once."""
    by_group: dict[str, list[UsageSample]] = {}
    for s in samples:
        by_group.setdefault(s.group, []).append(s)
    out = []
    lowering = replace(section, raise_=False, lower=True)
    for view in views:
        a = view.latest
        if a.state != "PENDING" or a.array_job_id is None or a.token in lowered:
            continue
        sizing = propose(by_group.get(group_of_task.get(view.index, ""), []), lowering, a.resources)
        if sizing is not None and sizing.time_min < (floor := a.resources.least_time_for_its_signal_min):
            sizing = replace(sizing, time_min=min(floor, a.resources.time_min),
                             evidence={**sizing.evidence, "signal_floor_min": floor})
        if sizing is None or (sizing.mem_mb, sizing.time_min) == (a.resources.mem_mb, a.resources.time_min):
            continue
        out.append(_lowering(view.index, a.token, a.job_id, a.array_job_id, a.resources, sizing))
    return out


def _lowering(task: int, token: str, job_id: str | None, array: str, old: Resources, sizing: Sizing) -> Decision:
    new = sizing.apply(old)
    changes = {k: (getattr(old, k), getattr(new, k)) for k in ("mem_mb", "time_min")
               if getattr(old, k) != getattr(new, k)}
    ev = sizing.evidence
    reason = (f"pending, asks {old.mem_mb}M / {old.time_min} min; {ev['samples']} ended attempts of its group "
              f"peaked at {ev['rss_q_mb']}M (q{ev['mem_quantile']}) and ran {ev['elapsed_q_s']} s "
              f"(q{ev['time_quantile']}): lowered to {new.mem_mb}M / {new.time_min} min before it starts."
              + _misses(ev))
    return Decision(task, token, RULE, "resize_pending", reason, {"job_id": job_id, "state": "PENDING", **ev},
                    ResizePending(changes=changes, array_job_id=array, resources=new), new)


def size_first(token: str, first_task: int, tasks: Sequence[int], group: str, sizing: Sizing,
               mode: str) -> Decision:
    """The record of a submission sized from its profile (the spec's values go out in shadow)."""
    ev = sizing.evidence
    asked = ev.get("asked")
    was = f"{asked['mem_mb']}M / {asked['time_min']} min" if isinstance(asked, dict) else "the spec's values"
    verb = "submitted with" if mode == "enforce" else "would submit with (shadow)"
    reason = (f"{group}: {ev['samples']} ended attempts of the profile peaked at {ev['rss_q_mb']}M "
              f"(q{ev['mem_quantile']} × {ev['mem_margin']}) and ran {ev['elapsed_q_s']} s "
              f"(q{ev['time_quantile']} × {ev['time_margin']}): {verb} {sizing.mem_mb}M / {sizing.time_min} min "
              f"instead of {was}." + _misses(ev))
    return Decision(first_task, f"{token}.0", RULE, SIZE_FIRST, reason, dict(ev),
                    SizeFirst(tasks=tuple(tasks), group=group, mem_mb=sizing.mem_mb, time_min=sizing.time_min),
                    None, mode)


def _misses(evidence: Mapping[str, object]) -> str:
    sized, wrong = evidence["right_sized"], evidence["wrong"]
    return f" Right-sizing was wrong {wrong} of {sized} times so far (OOM/TIMEOUT)." if sized else ""


def groups(settings: CampaignSettings, views: Sequence[TaskView]) -> dict[int, str]:
    """Task index → profile group (rung and `profile.by` parameters), from the revision's settings."""
    by = settings.profile.by if settings.profile else ()
    return {v.index: group_of(rung_of(v.index, settings), v.latest.params, by) for v in views}
