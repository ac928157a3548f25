"""Which pending tasks a retry's evidence reaches, and how far: the in-place raises (`scontrol
update`) of pending work after an OUT_OF_MEMORY or TIMEOUT, and the nodes the campaign excludes.
Pure.

A raise that costs nothing is made wherever the evidence may apply; one that costs throughput is
made only where the evidence says most of the tasks would fail anyway:
- time: a longer limit takes no slot from a node (Slurm packs by CPUs, memory and GPUs), so the
  group's pending tasks get the retry's limit;
- memory: a raise that keeps as many tasks per node (sinfo's nodes of the partition: CPUs,
  memory, GPUs) is made on the group's pending tasks too. One that fits fewer tasks per node costs
  every raised task's share of a node for its whole run, while the failure it spares costs only the
  tasks that would have failed, part of a run each; it is made only where at least half of the
  group's first attempts that started ended OUT_OF_MEMORY (over at least MIN_EVIDENCE of them).
  Started, not ended: failures end before completions do, so early in a campaign nearly every
  first attempt that ended has failed; counting the running ones keeps the share a lower bound;
- nodes the campaign excludes (`campaign_exclude_after` node failures) join every pending task's
  `--exclude`: a failing node ends every job on it.

Only a first attempt's failure raises others: it ran with the request its pending siblings still
have. A retry's failure (6h → 9h) tells of that task's tail, not of its group's.

The group is what the failures correlate with, learned from the first attempts: the value of one
task parameter (`model=big`) whose failure share is at least SEPARATES × the campaign's, else the
whole campaign.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from campaignctl.core.resources import Resources

MIN_EVIDENCE = 8  # first attempts ended in a group before its share counts
COSTLY_SHARE = 0.5  # a raise that fits fewer tasks per node needs this share of the group failing so
SEPARATES = 2.0  # a parameter value whose share is this × the campaign's is the group
CAMPAIGN = ("", "")  # the shares' key of the whole campaign
RAISING = ("OUT_OF_MEMORY", "TIMEOUT")  # the ends whose retry may raise its pending siblings too
NOT_STARTED = ("PENDING", "SUBMITTING", "ABANDONED", "NOT_SUBMITTED")


@dataclass(frozen=True, slots=True)
class NodeShape:
    """One node of the partition as sinfo reports it (%c CPUs, %m memory MB, GPUs of %G)."""

    cpus: int
    mem_mb: int
    gpus: int = 0


_GPUS = re.compile(r"gpu(?::[^:(,]+)?:(\d+)")  # gpu:a100:2(S:0) or gpu:2


def parse_node_shapes(text: str) -> tuple[NodeShape, ...]:
    """`sinfo -N -O NodeList:|,CPUs:|,Memory:|,Gres:|,StateLong:` → the distinct shapes of the
    nodes that can run work (a node down, drained or failing does not count), smallest first.
    Memory is RealMemory in MB; a node repeated for each partition counts once."""
    seen: dict[str, NodeShape] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5 or not parts[0] or not parts[1].isdigit() or not parts[2].isdigit():
            continue
        state = parts[4].lower()
        if state.endswith("*") or state.startswith(("down", "drain", "fail", "inval")):
            continue
        seen[parts[0]] = NodeShape(int(parts[1]), int(parts[2]), sum(int(n) for n in _GPUS.findall(parts[3])))
    return tuple(sorted(set(seen.values()), key=lambda n: (n.cpus, n.mem_mb, n.gpus)))


@dataclass(frozen=True, slots=True)
class Ends:
    """First attempts that started (running or ended) in one group, and how many ended so."""

    started: int = 0
    out_of_memory: int = 0
    timeout: int = 0

    def share(self, cause: str) -> float:
        return getattr(self, cause) / self.started if self.started else 0.0


Shares = Mapping[tuple[str, str], Ends]  # (parameter, value) → its tasks' first ends; CAMPAIGN → all


def tally_first_ends(rows: Iterable[tuple[Mapping[str, object], str]]) -> dict[tuple[str, str], Ends]:
    """(a task's parameters, its first attempt's state) → the shares by parameter value; a first
    attempt still pending (or never submitted) does not count."""
    counts: dict[tuple[str, str], list[int]] = {}
    for params, state in rows:
        if state in NOT_STARTED:
            continue
        hit = (state == "OUT_OF_MEMORY", state == "TIMEOUT")
        for key in (CAMPAIGN, *((k, str(v)) for k, v in params.items())):
            row = counts.setdefault(key, [0, 0, 0])
            row[0] += 1
            row[1] += hit[0]
            row[2] += hit[1]
    return {key: Ends(*row) for key, row in counts.items()}


@dataclass(frozen=True, slots=True)
class Group:
    key: tuple[str, str]  # CAMPAIGN or (parameter, value)
    ends: Ends
    cause: str

    @property
    def share(self) -> float:
        return self.ends.share(self.cause)

    def holds(self, params: Mapping[str, object]) -> bool:
        return self.key == CAMPAIGN or (self.key[0] in params and str(params[self.key[0]]) == self.key[1])

    def describe(self) -> str:
        where = "the campaign" if self.key == CAMPAIGN else f"{self.key[0]}={self.key[1]}"
        word = self.cause.replace("_", " ")
        return f"{where}: {self.ends.started} first attempts started, {self.share:.0%} ended {word}"


def group_of(params: Mapping[str, object], cause: str, shares: Shares) -> Group:
    """The trigger's group for `cause`: the parameter value that separates failures best, or the campaign."""
    whole = Group(CAMPAIGN, shares.get(CAMPAIGN, Ends()), cause)
    best = whole
    for key in ((k, str(v)) for k, v in params.items()):
        ends = shares.get(key)
        if ends is None or ends.started < MIN_EVIDENCE or ends.started == whole.ends.started:
            continue
        candidate = Group(key, ends, cause)
        if candidate.share >= SEPARATES * whole.share and candidate.share > best.share:
            best = candidate
    return best


def per_node(r: Resources, shape: NodeShape) -> int:
    """How many such tasks one node holds (`--mem=0` asks for a whole node). A multi-node task
    counts what it asks of each node: every process's CPUs there (`--mem` and `--gres` are per
    node already, sbatch's meaning)."""
    cpus = r.cpus_per_task * r.tasks_per_node
    fits = [shape.cpus // max(1, cpus), shape.mem_mb // r.mem_mb if r.mem_mb else 1]
    if r.gpus:
        fits.append(shape.gpus // r.gpus)
    return min(fits)


def costs_slots(old: Resources, mem_mb: int, shapes: Sequence[NodeShape]) -> bool:
    """Whether asking `mem_mb` instead fits fewer tasks on some node (unknown nodes: assume so)."""
    new = replace(old, mem_mb=mem_mb)
    return not shapes or any(per_node(new, s) < per_node(old, s) for s in shapes)


@dataclass(frozen=True, slots=True)
class SiblingFacts:
    """What a tick reads to size its raises: the partition's nodes and the first ends' shares."""

    shapes: tuple[NodeShape, ...]
    shares: Shares


def trigger_of(latest: Iterable[tuple[int, str]]) -> int | None:
    """Of the unanswered latest attempts (number, state), the index of the first that may raise
    pending work (a first attempt's OOM or TIMEOUT: a retry's raises nothing), or None: a tick
    reads sinfo and the shares only then."""
    return next((i for i, (number, state) in enumerate(latest) if number == 1 and state in RAISING), None)


@dataclass(frozen=True, slots=True)
class Raise:
    """What one retry's evidence raises, and where."""

    group: Group
    mem_mb: int | None  # None: memory stays as asked
    time_min: int | None
    why: str  # for the decision's evidence: how far it reaches and why


def plan_raise(cause: str, params: Mapping[str, object], old: Resources, new: Resources,
               shapes: Sequence[NodeShape], shares: Shares) -> Raise:
    """The raise a retry (`old` → `new` resources) carries to its group's pending tasks."""
    group = group_of(params, cause, shares)
    if cause == "timeout":
        return Raise(group, None, new.time_min, f"a longer limit takes no slot ({group.describe()})")
    if not costs_slots(old, new.mem_mb, shapes):
        return Raise(group, new.mem_mb, None, f"{new.mem_mb}M fits as many tasks per node ({group.describe()})")
    if group.ends.started >= MIN_EVIDENCE and group.share >= COSTLY_SHARE:
        return Raise(group, new.mem_mb, None,
                     f"{new.mem_mb}M fits fewer tasks per node, but most fail without it ({group.describe()})")
    return Raise(group, None, None, f"not raised: {new.mem_mb}M fits fewer tasks per node and "
                                    f"{group.describe()} (needs {COSTLY_SHARE:.0%} of at least {MIN_EVIDENCE})")
