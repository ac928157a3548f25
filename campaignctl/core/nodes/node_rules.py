"""The policy's `nodes` section: how the node ledger (core/nodes/ledger.py) weighs evidence, how
long it remembers and excludes, and how much of a partition it may take away. Pure values and
their reader.

    nodes: {threshold: 1.0, half_life: 3d, exclude_for: 30m, max_share: 0.25, window: 1h,
            repeat_tasks: 2, slow_factor: 1.5, crash_loop_after: 3,
            weights: {node_fail: 1.0, hardware: 1.0, collective: 0.5, repeated: 0.5, slow: 0.5}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from campaignctl.core.base.rawdoc import KeyPath
from campaignctl.core.base.reader import Reader

# evidence kinds, each with its weight (core/nodes/evidence.py says what each is)
NODE_FAIL, HARDWARE, COLLECTIVE, REPEATED, SLOW = "node_fail", "hardware", "collective", "repeated", "slow"
KINDS = (NODE_FAIL, HARDWARE, COLLECTIVE, REPEATED, SLOW)
NODE_KEYS = ("enabled", "threshold", "half_life", "exclude_for", "max_share", "window", "repeat_tasks",
             "slow_factor", "crash_loop_after", "weights")
_WEIGHTS = {NODE_FAIL: 1.0, HARDWARE: 1.0, COLLECTIVE: 0.5, REPEATED: 0.5, SLOW: 0.5}


@dataclass(frozen=True, slots=True)
class NodeRules:
    enabled: bool = True  # false: no evidence is recorded and the ledger excludes nothing for this campaign
    threshold: float = 1.0  # a node whose decayed score reaches this is excluded
    half_life_s: int = 3 * 86400  # evidence counts half after this long
    exclude_for_s: int = 1800  # an exclusion lasts this long after the evidence that made it; then probation
    max_share: float = 0.25  # of a partition's nodes the ledger may exclude at once
    window_s: int = 3600  # `repeated`: different tasks failing on one node within this window
    repeat_tasks: int = 2  # … at least this many of them
    slow_factor: float = 1.5  # `slow`: steps per second at most the group's median on other nodes / this
    crash_loop_after: int = 3  # the same failure signature this many attempts in a row holds the campaign (0: off)
    weights: Mapping[str, float] = field(default_factory=lambda: dict(_WEIGHTS))

    def weight(self, kind: str) -> float:
        return self.weights.get(kind, 0.0)

    @property
    def forgotten_below(self) -> float:
        """A node whose score decayed below this is no longer remembered (probation ends by itself)."""
        return self.threshold / 8


def read_node_rules(r: Reader, path: KeyPath, base: NodeRules) -> NodeRules:
    if r.mapping(path, NODE_KEYS) is None:
        return base
    def g(key: str, low: float, high: float, what: str, default: float) -> float:
        value = r.bounded((*path, key), low, high, what)
        return default if value is None else value

    weights = dict(base.weights)
    for kind in (r.mapping((*path, "weights"), KINDS) or {}):
        value = r.bounded((*path, "weights", kind), 0.0, 100.0, "a weight from 0 (ignore) to 100")
        if value is not None:
            weights[kind] = value
    after = r.integer((*path, "crash_loop_after"), 0, 1000, default=base.crash_loop_after)
    repeat = r.integer((*path, "repeat_tasks"), 2, 1000, default=base.repeat_tasks)
    return replace(
        base, enabled=r.boolean((*path, "enabled"), base.enabled),
        threshold=g("threshold", 0.01, 1000.0, "a score above 0 (1.0: one node failure)", base.threshold),
        half_life_s=max(60, r.duration((*path, "half_life"), base.half_life_s)),
        exclude_for_s=r.duration((*path, "exclude_for"), base.exclude_for_s),
        max_share=g("max_share", 0.0, 1.0, "a share of the partition's nodes from 0 to 1 (0.25: a quarter)",
                    base.max_share),
        window_s=r.duration((*path, "window"), base.window_s),
        repeat_tasks=base.repeat_tasks if repeat is None else repeat,
        slow_factor=g("slow_factor", 1.05, 100.0, "a factor above 1 (1.5: half again as slow)", base.slow_factor),
        crash_loop_after=base.crash_loop_after if after is None else after, weights=weights)


def node_rules_to_dict(rules: NodeRules) -> dict[str, Any]:
    return {**asdict(rules), "weights": dict(rules.weights)}


def node_rules_from_dict(data: Mapping[str, object] | None) -> NodeRules:
    """Stored policy JSON → NodeRules; a policy stored before the ledger existed gets the defaults."""
    if not data:
        return NodeRules()
    stored: dict[str, Any] = dict(data)
    return NodeRules(**{**stored, "weights": dict(stored.get("weights") or _WEIGHTS)})
