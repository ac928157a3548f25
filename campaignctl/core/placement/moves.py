"""Moving pending work between a campaign's clusters (`clusters:`, the policy's `placement`). Pure.

Slurm's own `-M a,b` places a job at submit and "makes no subsequent effort to migrate it"
(SchedMD's multi-cluster page). Here each tick compares, for every pending element of the
campaign, when its own cluster expects to start it (squeue's StartTime: the backfill scheduler's
estimate; without one, when that cluster would start a new one now) with when each other cluster
would start one now (`sbatch -M <c> --test-only`, core/placement/placement.py). An element no node
of its partition can take (every node drained: squeue says `Nodes required for job are DOWN,
DRAINED or reserved for jobs in higher priority partitions` with StartTime N/A, 22.05 and 24.11,
and --test-only there is refused) waits for ever; one that waits for us (held, a dependency, the
array's own throttle) is left alone, and so is one nobody can estimate. It moves when another
cluster would start it sooner by at least `move_margin` and by at least `move_fraction` of its
wait, at most `max_moves` times per task.

The move is the two-phase cancel of core/tick/fallback.py: this tick cancels the element only if
it is still pending (`scancel -M <c> --state=PENDING`); a later tick sees it CANCELLED and resubmits
it on the other cluster (decide's replacement). An element that started meanwhile runs where it
is: a task never runs twice. A cluster whose squeue did not answer this tick is never cancelled on.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from campaignctl.core.base.clock import from_slurm, read_time
from campaignctl.core.decisions.action_records import Cancel
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.placement.placement import Prediction
from campaignctl.core.policy.placement_section import Placement
from campaignctl.core.resources import Resources
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.clusters import UNREACHABLE
from campaignctl.core.spec.clusters_spec import CLUSTER_KEYS, ClusterSpec

RULE = "move"
# squeue reasons of an element no node of its partition can take now: no start will be estimated
NEVER = ("ReqNodeNotAvail", "PartitionDown", "PartitionInactive", "PartitionNodeLimit", "PartitionConfig",
         "Nodes required for job are DOWN", "BadConstraints")
# what a move takes from the spec's own request: what each cluster may name its own way, and the
# nodes to leave out (a pending element's are its cluster's)
ASKED = (*CLUSTER_KEYS[1:], "exclude")
# an element waiting for something another cluster does not change
WAITS_FOR_US = ("JobHeld", "Dependency", "BeginTime", "JobArrayTaskLimit", "DependencyNeverSatisfied")


@dataclass(frozen=True, slots=True)
class MoveFacts:
    """What the move rule reads, for a campaign with `clusters:` and pending work."""

    clusters: tuple[ClusterSpec, ...]
    base: Resources  # what the spec asks, before any cluster's own names
    default: str  # the cluster plain job ids are on (the one SLURM_CONF names)
    answered: frozenset[str]  # the clusters whose squeue answered this tick
    queued: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # element id → (StartTime, reason)
    predictions: Mapping[str, Prediction] = field(default_factory=dict)  # by cluster: a start now


def decide_moves(views: Sequence[TaskView], facts: MoveFacts, section: Placement, now: datetime,
                 moved: Mapping[int, int], cancelled: Collection[str]) -> list[Decision]:
    """A `cancel` (replaced on another cluster) per pending element that another cluster would start
    sooner by the section's margin; `moved`: moves per task so far, `cancelled`: attempt tokens a
    cancel was already asked for."""
    if not section.move_margin_s or len(facts.clusters) < 2:
        return []
    specs = {c.name: c for c in facts.clusters}
    offers = sorted((read_time(p.start), c) for c, p in facts.predictions.items() if p.start and c in specs)
    out = []
    for view in views:
        latest = view.latest
        if (latest.state != "PENDING" or not latest.job_id or latest.token in cancelled or latest.decided
                or moved.get(view.index, 0) >= section.max_moves):
            continue
        here = job_ref.cluster_of(latest.job_id) or facts.default
        if here not in facts.answered or here not in specs:
            continue
        if latest.job_id not in facts.queued:
            continue  # squeue does not list it: started or ended since sacct was read
        start_text, reason = facts.queued[latest.job_id]
        if reason.startswith(WAITS_FOR_US):
            continue
        start = from_slurm(start_text) if start_text and start_text[:1].isdigit() else None
        home = facts.predictions.get(here, Prediction(None, ""))
        start = start or home.start
        if start is None and not (reason.startswith(NEVER) or (home.why and home.why != UNREACHABLE)):
            continue  # no estimate anywhere: nothing to compare
        wait = read_time(start).timestamp() - now.timestamp() if start else math.inf
        target = next(((at, c) for at, c in offers if c != here), None)
        if target is None:
            continue
        at, to = target
        gain = read_time(start).timestamp() - at.timestamp() if start else math.inf
        if gain < section.move_margin_s or gain < section.move_fraction * wait:
            continue
        # the nodes it left out are `here`'s (a retry's, the ledger's): on `to` it leaves out what the spec asks
        new = replace(specs[to].resources(_unnamed(latest.resources, specs[here], facts.base)),
                      exclude=facts.base.exclude)
        waits = f"expected to start at {start}" if start else f"not expected to start ({reason})"
        text = (f"pending on {here}, {waits}; {to} would start it at {at.isoformat()}"
                + (f", {_minutes(gain)} sooner" if start else "") + f": cancelled while still pending and "
                f"resubmitted on {to}.")
        inputs = {"job_id": latest.job_id, "attempt": latest.number, "state": latest.state, "cluster": here,
                  "pending_reason": reason, "expected_start": start, "to": to,
                  "predictions": {c: p.to_evidence() for c, p in facts.predictions.items()},
                  "move_margin_s": section.move_margin_s, "move_fraction": section.move_fraction,
                  # what replay rebuilds these facts from (core/placement/replayed.py)
                  "default_cluster": facts.default, "asked": {k: getattr(facts.base, k) for k in ASKED}}
        changes = {k: (getattr(latest.resources, k), getattr(new, k)) for k in ASKED
                   if getattr(latest.resources, k) != getattr(new, k)}
        out.append(Decision(view.index, latest.token, RULE, "cancel", text, inputs,
                            Cancel(only_if="PENDING", replacement=new, changes=changes, to_cluster=to), new))
    return out


def _unnamed(resources: Resources, here: ClusterSpec, base: Resources) -> Resources:
    """`resources` with what `here` names its own way put back as the spec asks it."""
    own = {k: getattr(base, k) for k in CLUSTER_KEYS[1:] if getattr(here, k) is not None}
    return replace(resources, **own) if own else resources


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"
