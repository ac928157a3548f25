"""What one campaign's tick decides from (core/tick/tick.py): the snapshot read once, and the lazy
facts `needs` asks for, filled in by whoever builds it — the live tick (services/tick_snapshot.py),
`policy replay` (core/governance/replay.py) or the simulator (core/sim/driver.py). Plain data. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from campaignctl.core.decisions.decision import TaskView
from campaignctl.core.decisions.requests import Requests
from campaignctl.core.governance.governance import Awaiting, ProposalKey, RevisionRun
from campaignctl.core.model.training_metrics import Curve
from campaignctl.core.nodes.evidence import Completion
from campaignctl.core.nodes.ledger import Exclusion
from campaignctl.core.placement.moves import MoveFacts
from campaignctl.core.policy.policy import Policy
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.tick.right_size import UsageSample
from campaignctl.core.tick.siblings import SiblingFacts
from campaignctl.core.tick.starts import StartFacts
from campaignctl.core.tick.throttle import Loads
from campaignctl.core.tuning.ladder import TaskEnd
from campaignctl.core.tuning.search import Sampler, Trial
from campaignctl.core.usage.cost import UsageGroup
from campaignctl.core.usage.telemetry import Summary

Curves = Mapping[int, Curve]  # task index → the metric's points


@dataclass(frozen=True, slots=True)
class Needs:
    """The lazy facts a tick needs, beyond the snapshot's eager ones."""

    queue: bool = False  # squeue's pending reasons and sinfo's free GPUs (GPU-type fallback)
    metrics: frozenset[str] = frozenset()  # metrics whose curves it ranks or compares
    right_size: bool = False  # the campaign's own ended samples and the attempts right_size lowered
    siblings: bool = False  # sinfo's nodes of the partition and the first attempts' failure shares
    starts: bool = False  # the unstarted tasks' resources and groups, MaxArraySize, the profile's samples
    nodes: bool = False  # the node ledger's exclusion (its marks, sinfo's nodes of the partition)
    completions: bool = False  # the campaign's completed attempts: their nodes, steps and elapsed times
    last_completed: bool = False  # when the campaign's latest completed attempt ended (the crash-loop breaker)
    moves: bool = False  # squeue's estimates on every cluster and each cluster's prediction (core/placement/moves.py)


@dataclass(frozen=True, slots=True)
class TickSnapshot:
    """Everything one campaign's tick decides from, read once (plain data: a store, a recorded
    history or a simulated cluster can each build one)."""

    campaign_state: str  # active | paused (a paused campaign retries nothing, promotes nothing)
    revision: int  # the current revision's number
    settings: CampaignSettings
    views: tuple[TaskView, ...]  # core/slurm/observe.task_views: the tasks that can still matter
    requests: Requests = field(default_factory=Requests)  # standing resize_next/cancel/stop requests
    pending_since: Mapping[str, datetime] = field(default_factory=dict)  # token → submitted (PENDING/SUBMITTING)
    summaries: Mapping[str, Summary] = field(default_factory=dict)  # token → telemetry read this tick
    usage: tuple[UsageGroup, ...] = ()  # the spend's GROUP BY (read when the budget has limits)
    alerted: frozenset[str] = frozenset()  # keys of budget alerts already logged
    released_limits: tuple[Mapping[str, float], ...] = ()  # limits each logged `release` was over
    array_throttles: Mapping[str, int | None] = field(default_factory=dict)  # array job id → its %N
    # the arrays' running and pending elements where the caller counted them (the simulator, which
    # then needs no view of every waiting task); None: counted from `views`
    loads: Loads | None = None
    # attempts that died of a node failure, by cluster and node, where the caller counted them (the
    # simulator, which then needs no view of every task with one behind it); None: counted from `views`
    node_failures: Mapping[str, Mapping[str, int]] | None = None
    proposal_keys: frozenset[ProposalKey] = frozenset()  # shadow proposals logged so far
    awaiting: tuple[Awaiting, ...] = ()  # decisions waiting for approval
    revision_run: RevisionRun | None = None  # None: the revision is known-good already (or unread)
    task_ends: Mapping[int, TaskEnd] = field(default_factory=dict)  # progressive or a search: every started task
    promoted_rungs: frozenset[int] = frozenset()  # rungs whose promotion is logged
    forced_rungs: frozenset[int] = frozenset()  # rungs `resume --force` let past the budget gate
    candidate: Policy | None = None  # the revision's shadow candidate policy
    tasks_started: int = 0  # tasks with at least one attempt
    trials: tuple[Trial, ...] = ()  # a search's trials, from its logged asks and tells
    sampler: Sampler | None = None  # a search's sampler (None: no search, or nothing may be asked)
    unstarted: int = 0  # tasks the campaign starts with (not promoted, not asked) that have no attempt
    completed: int = 0  # attempts this tick saw complete
    suspected: frozenset[tuple[str, str]] = frozenset()  # (attempt token, node) of the logged node evidence
    crash_looped: frozenset[str] = frozenset()  # attempts a crash-loop hold already counted
    # lazy facts, filled in as `needs` asks (None: not read)
    pending_reasons: Mapping[str, str] | None = None  # squeue: "<array>_<index>" → pending reason
    free_gpus: Mapping[str, int] | None = None  # sinfo: GPU type → most free on one node
    curves: Mapping[str, Curves] = field(default_factory=dict)  # metric → task → points
    samples: tuple[UsageSample, ...] | None = None  # right_size: this campaign's ended attempts
    lowered: frozenset[str] = frozenset()  # right_size: attempt tokens it already lowered in place
    siblings: SiblingFacts | None = None  # how far an OOM/TIMEOUT retry's raise reaches (core/tick/siblings.py)
    starts: StartFacts | None = None  # what the start section sizes, packs and chunks (core/tick/starts.py)
    exclusion: Exclusion | None = None  # the node ledger's (core/nodes/ledger.py); None: unread, nothing excluded
    completions: tuple[Completion, ...] | None = None  # slow nodes and probation (core/nodes/evidence.py)
    last_completed: str | None = None  # the latest COMPLETED attempt's end (None: none, or unread)
    moves: MoveFacts | None = None  # pending work's estimates where it waits and elsewhere (core/placement/moves.py)


def with_facts(snapshot: TickSnapshot, pending_reasons: Mapping[str, str] | None = None,
               free_gpus: Mapping[str, int] | None = None,
               curves: Mapping[str, Curves] | None = None, samples: Sequence[UsageSample] | None = None,
               lowered: frozenset[str] | None = None, siblings: SiblingFacts | None = None,
               starts: StartFacts | None = None, exclusion: Exclusion | None = None,
               completions: Sequence[Completion] | None = None, last_completed: str | None = None,
               moves: MoveFacts | None = None) -> TickSnapshot:
    """The snapshot with lazy facts filled in (those given)."""
    return replace(snapshot, siblings=snapshot.siblings if siblings is None else siblings,
                   moves=snapshot.moves if moves is None else moves,
                   exclusion=snapshot.exclusion if exclusion is None else exclusion,
                   completions=snapshot.completions if completions is None else tuple(completions),
                   last_completed=snapshot.last_completed if last_completed is None else last_completed,
                   starts=snapshot.starts if starts is None else starts,
                   samples=snapshot.samples if samples is None else tuple(samples),
                   lowered=snapshot.lowered if lowered is None else lowered,
                   pending_reasons=snapshot.pending_reasons if pending_reasons is None else pending_reasons,
                   free_gpus=snapshot.free_gpus if free_gpus is None else free_gpus,
                   curves={**snapshot.curves, **(curves or {})})
