"""The start section of the tick: the first attempts of a campaign's tasks that have none yet — a
new campaign's, a revision's added tasks', a crashed `submit`'s — sized, packed and chunked, each
chunk one `start` decision with its evidence, carried out by the Actor like every retry. Pure.

Sizing (core/tick/right_size.py) and packing (core/packing/packing.py) read the profile's ended attempts; a
chunk holds at most MaxArraySize elements (core/slurm/plan.py), throttled to the spec's max_parallel.
Where right_size sized a chunk or `pack:` shaped it, a record-only `size_first` / `pack` decision
beside it says so (the profile counts a right-sized attempt by its `size_first`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from campaignctl.core.decisions.action_records import Start
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.nodes.ledger import NO_EXCLUSION, Exclusion, leaving_out, with_ledger
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing.packing import PackChoice, choose_shape, pack_decision
from campaignctl.core.placement.placement import Placer, Prediction
from campaignctl.core.policy.policy import Policy
from campaignctl.core.resources import Resources
from campaignctl.core.slurm.plan import ArrayChunk, plan_chunks
from campaignctl.core.spec.clusters_spec import ClusterSpec
from campaignctl.core.spec.pack_spec import PackSpec
from campaignctl.core.tick.right_size import RULE as RIGHT_SIZE
from campaignctl.core.tick.right_size import Sizing, UsageSample, propose, size_first

RULE = ACTION = "start"
TOKEN_PREFIX = "start."  # a start decision's token: `start.<its first task>` (no attempt exists yet)


@dataclass(frozen=True, slots=True)
class Unstarted:
    """A task the campaign starts with that has no attempt yet."""

    index: int
    resources: Resources  # what the spec asks for it
    group: str = ""  # its profile group (core/packing/profile.py): what right_size and `pack: auto` pool by


@dataclass(frozen=True, slots=True)
class StartFacts:
    """What the start section reads, only when a task is unstarted."""

    tasks: tuple[Unstarted, ...]
    max_array_size: int  # Slurm's MaxArraySize
    max_parallel: int | None = None  # the spec's array.max_parallel: each chunk's %N
    pack: PackSpec | None = None  # the spec's pack:
    samples: Mapping[str, tuple[UsageSample, ...]] = field(default_factory=dict)  # the profile's, by group
    profiled: bool = False  # the spec names a profile: (right_size and `pack: auto` need one)
    clusters: tuple[ClusterSpec, ...] = ()  # the spec's `clusters:`: each array is placed on one
    predictions: Mapping[str, Prediction] = field(default_factory=dict)  # by cluster (core/placement/placement.py)
    ledger_cluster: str = ""  # whose nodes the node ledger's exclusions name: arrays placed elsewhere skip them


@dataclass(frozen=True, slots=True)
class FirstSize:
    """Tasks whose first attempts ask `resources`: the spec's, or what right_size chose."""

    resources: Resources
    tasks: tuple[int, ...]
    sizing: Sizing | None = None
    group: str = ""
    mode: str = "enforce"
    asked: Resources | None = None  # what the spec asks, where right_size chose otherwise

    def note(self) -> str:
        if self.sizing is None:
            return ""
        return f"right_size: {size_first('', self.tasks[0], self.tasks, self.group, self.sizing, self.mode).reason}"


@dataclass(frozen=True, slots=True)
class PackGroup:
    """Tasks that go out packed alike (`choice` None: the spec has no pack:)."""

    tasks: tuple[int, ...]
    group: str = ""
    choice: PackChoice | None = None

    @property
    def shape(self) -> PackShape | None:
        return self.choice.shape if self.choice else None

    def note(self) -> str:
        return f"pack: {self.group or 'all tasks'}: {self.choice.why}" if self.choice else ""


@dataclass(frozen=True, slots=True)
class StartChunk:
    """One array of first attempts, with what sized and packed it."""

    size: FirstSize
    pack: PackGroup
    chunk: ArrayChunk

    @property
    def token(self) -> str:
        return f"{TOKEN_PREFIX}{self.chunk.task_indices[0]}"


def plan_starts(facts: StartFacts, policy: Policy) -> list[StartChunk]:
    """The unstarted tasks by what they ask (right_size's figures per group), how they are packed
    (per group under `pack: auto`), then in arrays of at most MaxArraySize elements."""
    by_resources: dict[Resources, list[Unstarted]] = {}
    for t in facts.tasks:
        by_resources.setdefault(t.resources, []).append(t)
    out = []
    for base, tasks in by_resources.items():
        for size in first_sizes(facts, policy, base, tasks):
            sized = set(size.tasks)
            members = [t for t in tasks if t.index in sized]
            for group in pack_groups(facts, size.resources, members):
                out += [StartChunk(size, group, chunk) for chunk in plan_chunks(
                    group.tasks, facts.max_array_size, facts.max_parallel, group.shape)]
    return out


def first_sizes(facts: StartFacts, policy: Policy, base: Resources, tasks: Sequence[Unstarted]) -> list[FirstSize]:
    """`tasks` (all asking `base`) by what their first attempts ask. Without a right_size section or
    a profile (or with too few samples), one group with the spec's resources."""
    section = policy.right_size
    if not (section.enabled and facts.profiled):
        return [FirstSize(base, tuple(t.index for t in tasks))]
    mode = policy.mode_of(RIGHT_SIZE)
    caps = policy.rule("out_of_memory").mem_cap_mb, policy.rule("timeout").time_cap_min
    out, unsized = [], []
    for group, indices in _by_group(tasks).items():
        sizing = propose(facts.samples.get(group, ()), section, base, *caps)
        if sizing is None:  # too few samples: the spec's resources, one submission for all such groups
            unsized += indices
            continue
        out.append(FirstSize(sizing.apply(base) if mode == "enforce" else base, tuple(indices), sizing, group, mode,
                             base))
    return out + ([FirstSize(base, tuple(sorted(unsized)))] if unsized else [])


def pack_groups(facts: StartFacts, each: Resources, tasks: Sequence[Unstarted]) -> list[PackGroup]:
    """`tasks` (first attempts asking `each`) by how they are packed: `pack: auto` chooses per
    profile group, from the history of that group."""
    pack = facts.pack
    indices = tuple(t.index for t in tasks)
    if pack is None or not tasks:
        return [PackGroup(indices)]
    if not pack.auto or not facts.profiled:
        return [PackGroup(indices, "", choose_shape(pack, each, []))]
    return [PackGroup(tuple(members), group, choose_shape(pack, each, facts.samples.get(group, ())))
            for group, members in _by_group(tasks).items()]


def _by_group(tasks: Sequence[Unstarted]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t in tasks:
        out.setdefault(t.group, []).append(t.index)
    return out


def decide_starts(facts: StartFacts, policy: Policy, ledger: Exclusion = NO_EXCLUSION) -> list[Decision]:
    """One `start` per chunk (enforced whatever the policy's mode: a campaign's first attempts are
    what its spec asks, not a rule's proposal), each followed by its `size_first` and `pack` records.
    Each chunk leaves out the nodes the node ledger excludes, and those on probation unless the
    array has one element."""
    out = []
    left = ledger  # one one-element array may go where a node is on probation, no later one
    placer = Placer([c.name for c in facts.clusters], facts.predictions) if facts.clusters else None
    for s in plan_starts(facts, policy):
        chunk, shape = s.chunk, s.chunk.pack
        placed = placer.place(chunk.elements) if placer is not None else None
        on = next((c for c in facts.clusters if placed and c.name == placed.cluster), None)
        resources = on.resources(s.size.resources) if on is not None else s.size.resources
        here = left if on is None or on.name == facts.ledger_cluster else NO_EXCLUSION
        tasks = list(chunk.task_indices)
        # what replay rebuilds the section's facts from (core/governance/replay.py): the spec's request, the group
        evidence: dict[str, object] = {"tasks": len(tasks), "max_array_size": facts.max_array_size,
                                       "max_parallel": facts.max_parallel,
                                       "spec_resources": asdict(s.size.asked or s.size.resources),
                                       "group": s.size.group or s.pack.group}
        if s.size.sizing is not None:
            evidence["right_size"] = {"group": s.size.group, "mode": s.size.mode, **s.size.sizing.evidence}
        if s.pack.choice is not None:
            evidence["pack"] = {"group": s.pack.group, "why": s.pack.choice.why, **s.pack.choice.evidence}
        if placed is not None:
            evidence["placement"] = {**placed.evidence, "why": placed.why, "ledger_cluster": facts.ledger_cluster}
        params = Start(tasks=tuple(tasks), throttle=chunk.throttle, group=s.size.group or s.pack.group,
                       per_element=shape.per_element if shape else 1, per_gpu=shape.per_gpu if shape else 1,
                       cpus=shape.cpus if shape else 0, processes=shape.processes or None if shape else None,
                       cluster=placed.cluster if placed else "")
        probing = here.probation if chunk.elements == 1 else ()
        reason = _reason(s) + (f" On {placed.cluster}: {placed.why}." if placed else "")
        start = Decision(tasks[0], s.token, RULE, ACTION, reason, evidence, params,
                         leaving_out(resources, here.for_array(chunk.elements)))
        out.append(with_ledger(start, replace(here, nodes=here.for_array(chunk.elements)), probing))
        left = left.probed() if probing else left
        if s.size.sizing is not None:
            out.append(replace(size_first("", tasks[0], tasks, s.size.group, s.size.sizing, s.size.mode),
                               attempt_token=s.token))
        if s.pack.choice is not None:
            out.append(replace(pack_decision("", tasks, s.pack.group, s.pack.choice), attempt_token=s.token))
    return out


def _reason(s: StartChunk) -> str:
    chunk, r = s.chunk, s.size.resources
    first, last = chunk.task_indices[0], chunk.task_indices[-1]
    which = f"task {first}" if chunk.size == 1 else f"{chunk.size} tasks ({first}-{last})" \
        if list(chunk.task_indices) == list(range(first, last + 1)) else f"{chunk.size} tasks (from {first})"
    throttle = f", {chunk.throttle} at once" if chunk.throttle else ""
    how = f"{r.mem_mb}M / {r.time_min} min" + (f" / {r.gpus} GPU" if r.gpus else "")
    sized = " (right-sized)" if s.size.sizing is not None and s.size.mode == "enforce" else ""
    packed = f", {s.pack.choice.why}" if s.pack.choice is not None and chunk.pack else ""
    return (f"first attempts of {which}: one array of {chunk.elements} element(s){throttle}, "
            f"each task {how}{sized}{packed}.")
