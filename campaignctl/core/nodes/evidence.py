"""What a tick learns about nodes: evidence for the ledger (core/nodes/ledger.py), each piece a
`suspect_node` decision citing the attempt it came from, and `clear_node` for a clean run on a
node on probation. Pure: the live tick, replay and the simulator derive the same decisions from
the same views.

Evidence, by kind (weights in the policy's `nodes.weights`):
- node_fail: an attempt ended NODE_FAIL or BOOT_FAIL; the node is the one the accounting events
  name (core/policy/suspects.py), else every node of the attempt;
- hardware: the program's output named the GPU itself (`gpu_hardware`: uncorrectable ECC, an Xid);
- collective: a collective timed out and this node's ranks reported none (the peer the others
  waited for);
- repeated: at least `repeat_tasks` different tasks failed (FAILED for no cause campaignctl can
  name, or lost) on this node within `window`, and it holds most of the campaign's such failures
  in that window (a bug fails everywhere alike; a bad node stands out);
- slow: a completed one-node attempt made steps at most 1/`slow_factor` of the rate its group's
  attempts made on other nodes (the median of at least two). Its steps are the last step it
  reported, its time sacct's Elapsed (the campaign's own attempts of the same resources and
  parameters group, core/tick/right_size.groups). campaignctl cannot tell a slow node from a slow
  configuration that only ran there: the comparison is within a group, on other nodes, and a node
  is excluded only when its score reaches the threshold (twice slow by default).
The slow and probation rules read the campaign's last COMPLETIONS_WINDOW completed attempts (by
end time, `latest`), not all of them: a tick of a 100,000-task campaign would otherwise read
every completed attempt and its metrics again, and a node's new completions are compared with
its group's recent ones."""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from campaignctl.core.base.clock import read_time, utc
from campaignctl.core.base.hostlist import split_nodes
from campaignctl.core.decisions.action_records import ClearNode, NodeSuspect
from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.nodes.ledger import Exclusion
from campaignctl.core.nodes.node_rules import COLLECTIVE, HARDWARE, NODE_FAIL, REPEATED, SLOW, NodeRules
from campaignctl.core.policy.output_causes import COLLECTIVE_TIMEOUT, GPU_HARDWARE
from campaignctl.core.policy.suspects import RANK_PREFIX, suspect_nodes

RULE = "nodes"
SUSPECT, CLEAR = "suspect_node", "clear_node"
NODE_STATES = ("NODE_FAIL", "BOOT_FAIL")
UNNAMED_FAILURES = ("FAILED", "LOST")  # failures no cause names: the node's doing as much as the task's
COMPLETIONS_WINDOW = 200  # completed attempts the slow-node and probation rules read, the latest ones


@dataclass(frozen=True, slots=True)
class Completion:
    """A completed attempt, as the slow-node and probation rules read it."""

    task: int
    token: str
    nodes: str
    ended_at: str
    elapsed_s: int
    steps: int  # the last step it reported (0: it reported none)
    group: str = ""  # core/tick/right_size.groups: attempts of like resources and parameters


def latest(completions: Sequence[Completion], window: int = COMPLETIONS_WINDOW) -> list[Completion]:
    """The `window` that ended last (ties by token, as the store's query orders them), in the
    order given."""
    if len(completions) <= window:
        return list(completions)
    kept = {c.token for c in sorted(completions, key=lambda c: (c.ended_at, c.token))[-window:]}
    return [c for c in completions if c.token in kept]


def node_decisions(views: Sequence[TaskView], completions: Sequence[Completion], exclusion: Exclusion,
                   suspected: frozenset[tuple[str, str]], rules: NodeRules, now: datetime) -> list[Decision]:
    """This tick's evidence and clean slates. `suspected`: (attempt token, node) pairs already
    logged, so that each piece of evidence is logged once."""
    if not rules.enabled:
        return []
    found: dict[tuple[str, str], Decision] = {}
    attempts = [(v.index, a) for v in views for a in v.attempts]
    for index, attempt in attempts:
        for node, kind, why in _evidence(attempt):
            _add(found, suspected, index, attempt, node, kind, why, rules)
    for (index, attempt), node, why in _repeated(attempts, rules, now):
        _add(found, suspected, index, attempt, node, REPEATED, why, rules)
    slow = list(_slow(completions, rules))
    for c, node, why in slow:
        key = (c.token, node)
        if key not in suspected and key not in found:
            found[key] = Decision(c.task, c.token, RULE, SUSPECT, f"{node} suspected ({SLOW}): {why}.",
                                  {"nodes": c.nodes, "elapsed_s": c.elapsed_s, "steps": c.steps, "group": c.group},
                                  NodeSuspect(node=node, kind=SLOW, weight=rules.weight(SLOW)))
    slow_runs = {c.token for c, _, _ in slow}  # completed, but slowly: not a clean run
    return [*found.values(), *_clears([c for c in completions if c.token not in slow_runs], exclusion)]


def _add(found: dict[tuple[str, str], Decision], suspected: frozenset[tuple[str, str]], index: int,
         attempt: AttemptView, node: str, kind: str, why: str, rules: NodeRules) -> None:
    key = (attempt.token, node)
    if key in suspected or key in found or rules.weight(kind) <= 0:
        return
    found[key] = Decision(index, attempt.token, RULE, SUSPECT, f"{node} suspected ({kind}): {why}.",
                          {"job_id": attempt.job_id, "attempt": attempt.number, "state": attempt.state,
                           "nodes": attempt.nodes, "ended_at": attempt.ended_at,
                           **({"cause": attempt.cause, "evidence": attempt.evidence} if attempt.cause else {})},
                          NodeSuspect(node=node, kind=kind, weight=rules.weight(kind)))


def _evidence(a: AttemptView) -> list[tuple[str, str, str]]:
    """(node, kind, why) of the evidence one ended attempt holds against its nodes."""
    what = f"attempt {a.number} ({a.job_id})"
    if a.state in NODE_STATES:
        return [(n, NODE_FAIL, f"{what} ended {a.state} on it") for n in suspect_nodes(a.nodes, a.cause, a.evidence)]
    if a.state != "FAILED" or not a.cause:
        return []
    if a.cause == GPU_HARDWARE:
        named = {m[2] for m in RANK_PREFIX.finditer(a.evidence)} or set(split_nodes(a.nodes))
        line = a.evidence.splitlines()[0][:200] if a.evidence else GPU_HARDWARE
        return [(n, HARDWARE, f"{what} failed there: {line}") for n in sorted(named)]
    if a.cause == COLLECTIVE_TIMEOUT:
        return [(n, COLLECTIVE, f"{what}: a collective timed out and no rank on it reported the timeout")
                for n in suspect_nodes(a.nodes, a.cause, a.evidence)]
    return []


def _repeated(attempts: Sequence[tuple[int, AttemptView]], rules: NodeRules,
              now: datetime) -> Iterable[tuple[tuple[int, AttemptView], str, str]]:
    since = utc(now) - timedelta(seconds=rules.window_s)
    failed = [(i, a) for i, a in attempts if (a.state in UNNAMED_FAILURES and not a.cause and len(
        split_nodes(a.nodes)) == 1 and a.ended_at and read_time(a.ended_at) >= since)]
    by_node: dict[str, list[tuple[int, AttemptView]]] = defaultdict(list)
    for i, a in failed:
        by_node[split_nodes(a.nodes)[0]].append((i, a))
    for node, there in sorted(by_node.items()):
        tasks = {i for i, _ in there}
        if len(tasks) >= rules.repeat_tasks and len(there) * 2 > len(failed):
            why = (f"{len(tasks)} different tasks failed on it within {rules.window_s // 60} min "
                   f"({len(there)} of the campaign's {len(failed)} unexplained failures there)")
            for pair in there:
                yield pair, node, why


def _slow(completions: Sequence[Completion], rules: NodeRules) -> Iterable[tuple[Completion, str, str]]:
    by_group: dict[str, list[tuple[Completion, str, float]]] = defaultdict(list)
    for c in completions:
        if c.steps > 0 and c.elapsed_s > 0 and len(nodes := split_nodes(c.nodes)) == 1:
            by_group[c.group].append((c, nodes[0], c.steps / c.elapsed_s))
    for group in by_group.values():
        # the median of the group's rates on the other nodes, once per node (a long campaign's
        # group holds thousands of completions on a few nodes)
        everyone = sorted(r for _, _, r in group)
        on_node: dict[str, list[float]] = defaultdict(list)
        for _, node, rate in group:
            on_node[node].append(rate)
        others_of = {node: (len(everyone) - len(rates), _median_without(everyone, rates))
                     for node, rates in on_node.items()}
        for c, node, rate in group:
            count, median = others_of[node]
            if count < 2:
                continue
            if rate * rules.slow_factor <= median:
                yield c, node, (f"task {c.task} made {rate:.3g} steps/s there, {median / rate:.2g}× slower than "
                                f"the median {median:.3g} of its group's {count} attempts on other nodes")


def _median_without(everyone: Sequence[float], removed: Sequence[float]) -> float:
    """statistics.median of sorted `everyone` less the values `removed` (each one of its
    elements), without copying it: the slow-node rule takes it for every node of every group on
    every tick that saw a completion (0.0 when nothing is left)."""
    n = len(everyone) - len(removed)
    if n <= 0:
        return 0.0
    gaps: list[int] = []  # the positions removed, ascending (equal values take successive positions)
    for rate in sorted(removed):
        at = bisect_left(everyone, rate)
        while gaps and at <= gaps[-1]:
            at = gaps[-1] + 1
        gaps.append(at)

    def nth(k: int) -> float:  # the k-th (from 0) value left
        for at in gaps:
            if at > k:
                break
            k += 1
        return everyone[k]
    return nth(n // 2) if n % 2 else (nth(n // 2 - 1) + nth(n // 2)) / 2


def _clears(completions: Sequence[Completion], exclusion: Exclusion) -> list[Decision]:
    out: dict[str, Decision] = {}
    for c in completions:
        nodes = split_nodes(c.nodes)
        for node in nodes:
            since = exclusion.probation_since.get(node)
            if since is None or node in out or not c.ended_at:
                continue
            started = read_time(c.ended_at) - timedelta(seconds=c.elapsed_s)
            if started >= since:
                out[node] = Decision(c.task, c.token, RULE, CLEAR,
                                     f"{node} cleared: task {c.task} completed there on probation.",
                                     {"nodes": c.nodes, "ended_at": c.ended_at, "elapsed_s": c.elapsed_s},
                                     ClearNode(node=node))
    return list(out.values())


def excluded_by_ledger(exclusion: Exclusion, tasks: int) -> Mapping[str, str]:
    """node → why, for an array of `tasks` tasks."""
    return {n: exclusion.why.get(n, n) for n in exclusion.for_array(tasks)}
