"""`campaignctl nodes`: the node ledger of this cluster as every campaign's tick sees it, and
`nodes forgive`, a person's clean slate for a node (a row of the ledger, with who and why)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from campaignctl.adapters import identity, slurm
from campaignctl.adapters.policy_source import load_policy
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import InputError
from campaignctl.core.base.safety import SLURM_WORD
from campaignctl.core.nodes.ledger import Standing, described, standings


@dataclass(frozen=True, slots=True)
class NodeRow:
    cluster: str
    node: str
    state: str
    score: float
    evidence: dict[str, int]
    since: str
    expires: str | None
    campaigns: list[str]
    why: str


@dataclass(frozen=True, slots=True)
class NodeLedger:
    cluster: str
    nodes: list[NodeRow]

    def to_dict(self) -> dict[str, object]:
        return {"cluster": self.cluster, "nodes": [asdict(n) for n in self.nodes]}


def node_ledger(cluster: str | None = None, policy: str = "default", now: datetime | None = None) -> NodeLedger:
    """Every node the ledger remembers, scored with `policy`'s `nodes` rules (a built-in policy's
    name or a policy file: each campaign's ticks score by its own policy)."""
    now = now or datetime.now(timezone.utc)
    name = cluster or slurm.cluster_name()
    rules = load_policy(policy, str(Path.cwd())).nodes
    ranked = standings(Store.open().nodes.marks(name, now), now, rules)
    return NodeLedger(name, [_row(name, s) for s in ranked])


def _row(cluster: str, s: Standing) -> NodeRow:
    return NodeRow(cluster, s.node, s.state, s.score, dict(s.kinds), s.since.isoformat(timespec="seconds"),
                   s.expires.isoformat(timespec="seconds") if s.expires else None, list(s.campaigns), described(s))


def forgive(node: str, reason: str, cluster: str | None = None) -> str:
    """Wipe `node`'s slate on the cluster; returns the cluster's name."""
    if not SLURM_WORD.fullmatch(node):
        raise InputError(f"{node!r} is not a node name", "give it as `sinfo -N -o %N` prints it, e.g. node3")
    name = cluster or slurm.cluster_name()
    Store.open().nodes.forgive(name, node, identity.user_name(), reason or "forgiven by hand")
    return name
