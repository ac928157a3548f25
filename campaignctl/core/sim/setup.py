"""One simulation's inputs, and what the policy sees of a simulated attempt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from campaignctl.core.base.clock import stamp
from campaignctl.core.decisions.decision import AttemptView
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.policy.output_causes import GPU_HARDWARE, GPU_OOM
from campaignctl.core.resources import Resources
from campaignctl.core.sim.cluster import Cluster
from campaignctl.core.sim.scheduler import Job
from campaignctl.core.sim.workload import Synthetic, Truth
from campaignctl.core.spec.search_spec import SearchSpec

# what a simulated attempt's output shows for the cause the runner names (tests/fixtures/output/)
EVIDENCE = {GPU_OOM: "torch.OutOfMemoryError: CUDA out of memory.",
            GPU_HARDWARE: "[NVIDIA Xid] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."}


@dataclass(frozen=True, slots=True)
class Setup:
    """One simulation's inputs, the same for every policy compared."""

    cluster: Cluster
    resources: Resources  # the spec's resources (attempt 1's, unless a trace row says otherwise)
    truths: tuple[Truth, ...]
    workload: Synthetic
    seed: int
    max_parallel: int | None = None
    tick_s: int = 300
    flaky: frozenset[int] = frozenset()  # indexes of flaky nodes (node_fail strikes only there)
    requeue: bool = False  # jobs allow Slurm's requeue on preemption (policy slurm_requeue)
    horizon_s: int = 365 * 86400  # a run that goes on this long is cut off
    track: bool = False  # keep every carried-out decision (task, rule, action) in the tally
    pack: PackShape | None = None  # first attempts packed so (core/sim/packs.py)
    search: SearchSpec | None = None  # a search: nothing submitted at the start, its ticks ask for trials
    lemons: frozenset[int] = frozenset()  # indexes of lemon nodes (GPU errors, slowness: workload lemon_*)
    clusters: tuple[str, ...] = ()  # several clusters (core/sim/clusters.py): their names; () one
    placement: str = ""  # with clusters: one-cluster, placed or placed+moves (core/sim/clusters.MODES)
    busy_jobs: int = 0  # other users' one-hour jobs queued on the first cluster before the campaign


def attempt_view(job: Job, now: int, at: Callable[[int], datetime], node_names: Sequence[str],
                 decided: set[str]) -> AttemptView:
    """The attempt as a tick reads it from sacct: ended ones with their exit, cause and end. An
    ended one's view is kept until it is decided or runs again (a requeue): a pending task's view
    is made again each time a wave resizes it, its earlier attempts with it."""
    ended = job.state not in ("PENDING", "RUNNING")
    if ended:
        made = (job.starts, job.state, job.end_at, job.token in decided)
        if job.viewed is not None and job.viewed[0] == made:
            return job.viewed[1]
        view = _view(job, now, at, node_names, decided, ended)
        job.viewed = (made, view)
        return view
    return _view(job, now, at, node_names, decided, ended)


def _view(job: Job, now: int, at: Callable[[int], datetime], node_names: Sequence[str], decided: set[str],
          ended: bool) -> AttemptView:
    end = job.end_at if ended and job.end_at is not None else now
    cause = job.cause if ended else None
    return AttemptView(
        job.token, job.attempt, job.state, job.jid, job.res, exit_code=job.exit if ended else None,
        slurm_state=job.state, nodes=node_names[job.node] if job.node is not None else "",
        elapsed_s=end - job.start if job.start is not None else None,
        ended_at=stamp(at(end)) if ended else None, decided=job.token in decided, cause=cause,
        evidence=EVIDENCE.get(cause, "") if cause else "",
        params=job.params, params_changed=job.params_changed, packed=job.host is not None)
