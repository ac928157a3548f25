"""Which nodes of a multi-node attempt to blame. Pure.

A NODE_FAIL job's sacct NodeList is its whole allocation (`4692|…|NODE_FAIL|0:0|…|node[1-2]|
billing=4,cpu=4,mem=600M,node=2`, tests/fixtures/slurm_events/) and no sacct field says which node
failed; slurmctld's log says (`Killing JobId=4692 on failed node node2`) and so does the accounting
database, where it records every node state change as an event: `sacctmgr show event` printed
`node2|2026-11-24T08:30:19|2026-11-24T08:30:19|DOWN|mnprobe|root(0)` for that job. Reconcile asks
for the events of the job's nodes over its run and stores the matching lines as the attempt's
evidence (cause `node_events`); a retry excludes those nodes, not the healthy rest.

A collective timeout is reported by the ranks that waited (NCCL's watchdog names its own rank:
`[Rank 1] Watchdog caught collective operation timeout`); the peer they waited for hung or died
and printed nothing. So the suspects are the attempt's nodes none of whose ranks reported one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from campaignctl.core.base.clock import from_slurm, read_time
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.policy.output_causes import COLLECTIVE_TIMEOUT, GPU_OOM

NODE_EVENTS = "node_events"  # the stored cause of a NODE_FAIL whose evidence is sacctmgr's event lines
EVENT_FIELDS = ("NodeName", "TimeStart", "TimeEnd", "State", "Reason", "User")
# states a node is in after it failed under a job (sinfo(1) NODE STATE CODES); IDLE/MIXED events are not failures
FAILED_STATES = ("DOWN", "FAIL", "DRAIN", "NOT_RESPONDING", "NO_RESPOND", "POWER_DOWN", "REBOOT")
RANK_PREFIX = re.compile(r"^\[rank (\d+) on ([^\]\s]+)\] ", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class NodeEvent:
    node: str
    start: str
    end: str
    state: str
    reason: str


def parse_node_events(text: str) -> list[NodeEvent]:
    """`sacctmgr -n -P show event format=NodeName,TimeStart,TimeEnd,State,Reason,User` lines;
    the cluster-wide events (no NodeName) and short lines are skipped."""
    events = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) >= 5 and fields[0]:
            events.append(NodeEvent(*fields[:5]))
    return events


def failed_node_events(events: Sequence[NodeEvent], nodelist: str, started: datetime | None = None) -> list[NodeEvent]:
    """The events that put one of the job's nodes out of service, from `started` (when the job
    started) on. One that began before it failed something else: slurmctld gave the job the node
    once it was back in service. (Its TimeEnd says nothing of that: a DOWN event's TimeEnd is
    its TimeStart, 22.05 and 24.11, whatever the node did next.)"""
    nodes = set(split_nodes(nodelist))
    return [e for e in events if e.node in nodes and any(s in e.state.upper() for s in FAILED_STATES)
            and not (started is not None and _before(e.start, started))]


def _before(slurm_time: str, moment: datetime) -> bool:
    """`slurm_time` (as sacctmgr prints it under TZ=UTC) is before `moment`; unreadable: no."""
    try:
        return read_time(from_slurm(slurm_time)) < moment
    except ValueError:
        return False


def node_events_evidence(events: Sequence[NodeEvent]) -> str:
    return "\n".join("|".join((e.node, e.start, e.end, e.state, e.reason)) for e in events)


@dataclass(frozen=True, slots=True)
class RankCause:
    """What one rank's runner named in its exit file."""

    rank: int
    node: str
    cause: str
    evidence: str


def attempt_cause(ranks: Sequence[RankCause], nodelist: str) -> tuple[str, str] | None:
    """The attempt's (cause, evidence) from its ranks'. One rank out of GPU memory is the
    attempt's OOM, whatever the others then printed (their collectives time out waiting for it);
    a collective timeout keeps every reporting rank's line, marked with its node, so that
    `suspect_nodes` can tell which node reported none; otherwise the lowest rank's cause."""
    if len(split_nodes(nodelist)) < 2:  # one node: rank 0's, as a one-process attempt's
        return next(((r.cause, r.evidence) for r in ranks if r.rank == 0), None)
    ordered = sorted(ranks, key=lambda r: (r.cause != GPU_OOM, r.rank))
    if not ordered:
        return None
    first = ordered[0]
    if first.cause != COLLECTIVE_TIMEOUT:
        return first.cause, _marked(first)
    return first.cause, "\n".join(_marked(r) for r in ordered if r.cause == COLLECTIVE_TIMEOUT)


def _marked(r: RankCause) -> str:
    return f"[rank {r.rank} on {r.node}] {r.evidence}"


def suspect_nodes(nodelist: str, cause: str | None, evidence: str) -> list[str]:
    """The nodes a retry should avoid: those the evidence blames, else every node of the attempt
    (a one-node attempt, or a failure that names no node)."""
    nodes = split_nodes(nodelist)
    if cause == NODE_EVENTS:
        failed = {e.node for e in parse_node_events(evidence)}
        return [n for n in nodes if n in failed] or nodes
    if cause == COLLECTIVE_TIMEOUT:
        reported = {m[2] for m in RANK_PREFIX.finditer(evidence)}
        return [n for n in nodes if n not in reported] if reported else []
    return nodes


def blamed(nodelist: str, cause: str | None, evidence: str) -> str:
    """` of node2 (of node[1-2]; DOWN at …, reason …)` for a multi-node NODE_FAIL whose event was
    found; '' otherwise (the state says it all)."""
    if cause != NODE_EVENTS:
        return ""
    events = parse_node_events(evidence)
    said = "; ".join(f"{e.node} {e.state} at {e.start}, reason {e.reason or 'none'}" for e in events)
    return f" of {', '.join(suspect_nodes(nodelist, cause, evidence))} (of {nodelist}: {said})"
