"""The node ledger: what a cluster's nodes did to the campaigns that ran on them, remembered across
campaigns and users (the store's `node_marks`, one row per piece of evidence), scored, and turned
into the nodes a new array leaves out. Pure.

A node's score is the sum of its evidence's weights, each halved every `half_life`
(core/nodes/node_rules.py), counted since the last clean run or `nodes forgive`. Evidence that
brings the score to the threshold (within 1 %: THRESHOLD_SLACK) excludes the node for
`exclude_for` from that evidence; later evidence over the threshold extends it. After the
exclusion the node is on probation: left out of arrays of more than one task and of pending
elements, and out of every array once one one-task array was let onto it (a `probe` mark) until
that probe has had `exclude_for` to run: one task at a time may run there. A clean run clears it, a failure there
excludes it again. A node whose score decayed below an eighth of the threshold is forgotten.
Exclusions never take more than `max_share` of a partition's nodes (the highest scores first),
never name a node the partition does not have (sbatch refuses an unknown node name), and the
shell drops them all when `sbatch --test-only` says a job excluding them would be refused: the
ledger fails open.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.nodes.node_rules import NodeRules
from campaignctl.core.resources import Resources

# A score within this share of the threshold reaches it: evidence decays from the moment it is
# recorded, so two half-weight pieces (two slow runs) found in different ticks sum to a little less
# than 1.0 (30 minutes apart at a 3-day half-life: 0.9980). With 1 % they reach it when found
# within two hours of each other.
THRESHOLD_SLACK = 0.01
CLEARED, FORGIVEN = "cleared", "forgiven"  # marks that wipe a node's slate (a clean run, a person)
PROBE = "probe"  # a mark of weight 0: one task on probation was let onto the node at that time
EXCLUDED, PROBING, PROBATION, WATCHED = "excluded", "probing", "probation", "watched"


@dataclass(frozen=True, slots=True)
class NodeMark:
    """One row of the ledger: evidence against a node, or a clean slate."""

    node: str
    at: datetime
    kind: str  # an evidence kind (core/nodes/node_rules.KINDS), CLEARED or FORGIVEN
    weight: float = 0.0
    campaign: str = ""  # the campaign the evidence came from ('' for `nodes forgive`)
    user: str = ""  # whose tick (or command) wrote it
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Standing:
    """Where one node stands now."""

    node: str
    state: str  # excluded | probation | watched
    score: float  # to 2 decimals: what screens show (a day-old 1.0 is 0.79)
    since: datetime  # its first evidence since its slate was last wiped
    expires: datetime | None  # the exclusion's end (None: never reached the threshold)
    kinds: Mapping[str, int]  # evidence kind → how many
    campaigns: tuple[str, ...]
    last: str  # the latest evidence's reason


@dataclass(frozen=True, slots=True)
class Exclusion:
    """What this tick's new arrays and pending elements leave out."""

    nodes: tuple[str, ...] = ()  # out of every new array and every pending element
    probation: tuple[str, ...] = ()  # out of arrays of more than one task
    why: Mapping[str, str] = field(default_factory=dict)  # node → the one line a decision's reason cites
    capped: tuple[str, ...] = ()  # excluded or on probation by the ledger, left in by the cap
    probation_since: Mapping[str, datetime] = field(default_factory=dict)  # node on probation → since when
    note: str = ""  # why nothing is excluded although the ledger says so (fail open)

    def for_array(self, tasks: int) -> tuple[str, ...]:
        return tuple(sorted({*self.nodes, *(self.probation if tasks > 1 else ())}))

    def probed(self) -> Exclusion:
        """The exclusion once a one-task array was let onto the nodes on probation: none more is."""
        return replace(self, nodes=tuple(sorted({*self.nodes, *self.probation})), probation=())

    def inputs(self, probing: Sequence[str] = ()) -> dict[str, object]:
        """What a decision that applied it records (what `policy replay` reads back); `probing`:
        the nodes on probation the decision is the one task let onto."""
        return {"node_ledger": {"excluded": list(self.nodes), "probation": list(self.probation),
                                "why": dict(self.why),
                                "probation_since": {n: t.isoformat() for n, t in self.probation_since.items()},
                                **({"probing": list(probing)} if probing else {})}}


NO_EXCLUSION = Exclusion()


def with_ledger(d: Decision, ledger: Exclusion, probing: Sequence[str] = ()) -> Decision:
    """A decision whose new resources leave out nodes because of the ledger says which and why,
    and records the exclusion it applied (replay reads it back); `probing`: the nodes on
    probation it is the one task let onto (written to the ledger as `probe` marks)."""
    left_out = split_nodes(d.resources.exclude or "") if d.resources is not None else []
    # a node on probation in an exclude list is there for it: kept out of a pending element (decide.py)
    nodes = [n for n in dict.fromkeys((*ledger.nodes, *ledger.probation)) if n in left_out]
    if not nodes and not probing:
        return d
    said = [f"the node ledger leaves out {'; '.join(ledger.why.get(n, n) for n in nodes)}"] if nodes else []
    said += [f"it is the one task let onto {', '.join(probing)} on probation"] if probing else []
    return replace(d, reason=f"{d.reason.rstrip('.')}; {'; '.join(said)}.",
                   inputs={**d.inputs, **ledger.inputs(probing)})


def probing_of(d: Decision) -> list[str]:
    """The nodes on probation a decision is the probe of (its recorded `node_ledger.probing`)."""
    ledger = d.inputs.get("node_ledger")
    probing = ledger.get("probing") if isinstance(ledger, dict) else None
    return [str(n) for n in probing] if isinstance(probing, list) else []


def leaving_out(r: Resources, nodes: Sequence[str]) -> Resources:
    """`r` with `nodes` added to its --exclude."""
    if not nodes:
        return r
    return replace(r, exclude=",".join(sorted({*split_nodes(r.exclude or ""), *nodes})))


def score_at(marks: Iterable[NodeMark], at: datetime, half_life_s: int) -> float:
    return sum(m.weight * math.pow(0.5, max(0.0, (at - m.at).total_seconds()) / half_life_s)
               for m in marks if m.at <= at)


def standings(marks: Iterable[NodeMark], now: datetime, rules: NodeRules) -> list[Standing]:
    """Every remembered node's standing at `now`, highest score first."""
    by_node: dict[str, list[NodeMark]] = {}
    for m in sorted(marks, key=lambda m: m.at):
        if m.at <= now:
            by_node.setdefault(m.node, []).append(m)
    out = [s for node, ms in by_node.items() if (s := _standing(node, ms, now, rules)) is not None]
    return sorted(out, key=lambda s: (-s.score, s.node))


def _standing(node: str, marks: Sequence[NodeMark], now: datetime, rules: NodeRules) -> Standing | None:
    wiped = max((i for i, m in enumerate(marks) if m.kind in (CLEARED, FORGIVEN)), default=-1)
    evidence = [m for m in marks[wiped + 1:] if m.kind != PROBE]
    probes = [m.at for m in marks[wiped + 1:] if m.kind == PROBE]
    if not evidence:
        return None
    expires = None
    running, last = 0.0, evidence[0].at  # the score at each mark, carried forward (marks oldest first)
    for m in evidence:
        running = running * math.pow(0.5, (m.at - last).total_seconds() / rules.half_life_s) + m.weight
        last = m.at
        if running >= rules.threshold * (1 - THRESHOLD_SLACK):
            expires = m.at + timedelta(seconds=rules.exclude_for_s)
    score = score_at(evidence, now, rules.half_life_s)
    if score < rules.forgotten_below:
        return None
    probe = max((at for at in probes if expires is not None and at >= expires), default=None)
    state = WATCHED if expires is None else EXCLUDED if now < expires else PROBING \
        if probe is not None and now < probe + timedelta(seconds=rules.exclude_for_s) else PROBATION
    kinds: dict[str, int] = {}
    for m in evidence:
        kinds[m.kind] = kinds.get(m.kind, 0) + 1
    campaigns = tuple(sorted({m.campaign for m in evidence if m.campaign}))
    return Standing(node, state, round(score, 2), evidence[0].at, expires, kinds, campaigns, evidence[-1].reason)


def exclusion(ranked: Sequence[Standing], partition: Collection[str], rules: NodeRules) -> Exclusion:
    """The nodes of `partition` the ledger keeps new work from: at most `max_share` of them,
    the highest scores first."""
    cap = math.floor(rules.max_share * len(partition) + 1e-9)
    out: list[Standing] = [s for s in ranked if s.state in (EXCLUDED, PROBING, PROBATION) and s.node in partition]
    kept, capped = out[:cap], out[cap:]
    return Exclusion(tuple(sorted(s.node for s in kept if s.state in (EXCLUDED, PROBING))),
                     tuple(sorted(s.node for s in kept if s.state == PROBATION)),
                     {s.node: described(s) for s in kept}, tuple(sorted(s.node for s in capped)),
                     {s.node: s.expires for s in out if s.state in (PROBING, PROBATION) and s.expires is not None})


def described(s: Standing) -> str:
    what = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(s.kinds.items()))
    where = f" in {', '.join(s.campaigns)}" if s.campaigns else ""
    until = (f"excluded until {s.expires:%Y-%m-%d %H:%M} UTC" if s.state == EXCLUDED and s.expires
             else "on probation: one task at a time may run there" if s.state == PROBATION
             else "on probation: a task was let onto it, none more until it has run" if s.state == PROBING
             else "watched")
    return f"{s.node}: score {s.score:g} ({what}{where}); {until}"


def recorded_exclusion(inputs: Iterable[Mapping[str, object]]) -> Exclusion | None:
    """The exclusion a tick's logged decisions applied (their `node_ledger` input), for replay;
    None when none of them recorded one."""
    for given in inputs:
        found = given.get("node_ledger")
        if isinstance(found, dict):
            why, since = found.get("why"), found.get("probation_since")
            return Exclusion(tuple(str(n) for n in found.get("excluded") or ()),
                             tuple(str(n) for n in found.get("probation") or ()),
                             {str(k): str(v) for k, v in why.items()} if isinstance(why, dict) else {},
                             probation_since={str(k): datetime.fromisoformat(str(v)) for k, v in since.items()}
                             if isinstance(since, dict) else {})
    return None
