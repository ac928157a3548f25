"""What one simulated run adds up to: hours allocated and wasted, decisions by rule, each task's
end. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from campaignctl.core.decisions.action_records import array_of
from campaignctl.core.decisions.decision_rows import GROUPED

if TYPE_CHECKING:
    from campaignctl.core.sim.scheduler import Job
    from campaignctl.core.tick.tick import TickPlan


@dataclass(slots=True)
class Tally:
    tasks: int
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    wasted_gpu_hours: float = 0.0  # allocated to attempts (or runs of a requeued job) that did not complete
    wasted_cpu_hours: float = 0.0
    gpu_hours_by_type: dict[str, float] = field(default_factory=dict)
    wasted_by_end: dict[str, float] = field(default_factory=dict)  # final state → GPU-hours (CPU-hours without GPUs)
    lemon_gpu_hours: float = 0.0  # wasted on lemon nodes: failed runs there, and what slowness added to the rest
    attempts: int = 0  # campaign jobs started (a requeued job counts once per start)
    ends: Counter[str] = field(default_factory=Counter)  # final Slurm state of each run
    decisions: Counter[str] = field(default_factory=Counter)  # "rule → action" carried out
    log_rows: int = 0  # rows the decision log would hold for them (core/decisions/decision_rows.py)
    proposals: Counter[str] = field(default_factory=Counter)  # shadow, or waiting for approval
    ticks: int = 0
    running: int = 0
    pending: int = 0
    makespan_s: int = 0  # when the last task settled
    end_s: int = 0  # when the simulation stopped
    outcome: dict[int, tuple[str, int]] = field(default_factory=dict)  # task → (how it ended, attempts)
    track: bool = False  # keep each carried-out decision's (task, rule, action) in `decided`
    decided: list[tuple[int, str, str]] = field(default_factory=list)

    def started(self, job: Job) -> None:
        if job.task >= 0:
            self.attempts += 1
            self.running += 1
            self.pending -= int(job.starts == 1)  # a requeued job was not counted pending again

    def stopped(self, job: Job, now: int, state: str) -> None:
        if job.task < 0 or job.start is None:
            return
        self.running -= 1
        hours = (now - job.start) / 3600 * job.share  # a packed task: its share of its pack's allocation
        gpu, cpu = hours * job.res.gpus, hours * job.res.cpus_per_task
        self.gpu_hours += gpu
        self.cpu_hours += cpu
        if job.res.gpus:
            kind = job.res.gpu_type or "any"
            self.gpu_hours_by_type[kind] = self.gpu_hours_by_type.get(kind, 0.0) + gpu
        self.ends[state] += 1
        if state != "COMPLETED":
            self.wasted_gpu_hours += gpu
            self.wasted_cpu_hours += cpu
            self.wasted_by_end[state] = self.wasted_by_end.get(state, 0.0) + (gpu if job.res.gpus else cpu)

    def idle(self, gpu_hours: float, cpu_hours: float) -> None:
        """A pack's allocation held after some of its tasks ended, before the last did: allocated,
        and wasted (no task used that share of it)."""
        self.gpu_hours += gpu_hours
        self.cpu_hours += cpu_hours
        self.wasted_gpu_hours += gpu_hours
        self.wasted_cpu_hours += cpu_hours
        self.wasted_by_end["PACK_IDLE"] = self.wasted_by_end.get("PACK_IDLE", 0.0) + (gpu_hours or cpu_hours)

    def settle(self, now: int) -> None:
        self.makespan_s = now

    def tick(self, plan: TickPlan, stand_ins: Mapping[str, Sequence[Job]] | None = None) -> None:
        """Count the plan's decisions: one that stands for several pending elements (the engine's
        `stand_ins`) counts once for each, as the log would expand its row."""
        self.ticks += 1
        shared: set[tuple[object, ...]] = set()  # one row per scontrol update, rule and reason
        for d in plan.decisions:
            if d.mode == "enforce" and not d.gate:
                row = (array_of(d.typed), d.resources, d.rule, d.reason)
                self.log_rows += d.action not in GROUPED or row not in shared
                if d.action in GROUPED:
                    shared.add(row)
            key = f"{d.rule} → {d.action}"
            if d.mode == "enforce" and not d.gate:
                alike = stand_ins.get(d.attempt_token) if stand_ins and d.action in GROUPED else None
                self.decisions[key] += len(alike) if alike else 1
                if self.track:
                    self.decided += [(j.task, d.rule, d.action) for j in alike] if alike else [
                        (d.task_index, d.rule, d.action)]
            else:
                self.proposals[key] += 1
        for d in plan.proposals:
            self.proposals[f"{d.rule} → {d.action}"] += 1

    def finish(self, settled: dict[int, str], jobs: list[list[Job]], now: int) -> None:
        """Each task's end: completed | given_up | stopped, or how it was left when the run
        stopped (pending, held, running, unanswered, never_submitted)."""
        self.end_s = now
        for task, attempts in enumerate(jobs):
            if task in settled:
                end = settled[task]
            elif not attempts:
                end = "never_submitted"
            else:
                latest = attempts[-1]
                end = ("held" if latest.held else latest.state.lower()) if latest.state in (
                    "PENDING", "RUNNING") else "unanswered"
            self.outcome[task] = (end, len(attempts))

    def counts(self) -> Counter[str]:
        return Counter(end for end, _ in self.outcome.values())
