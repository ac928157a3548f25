"""The node ledger's rows (`node_marks`): written with the tick's decisions that are its evidence
(in the same transaction, adapters/decision_log.py), and by `nodes forgive`; read by every
campaign's tick on the same cluster, whoever's it is (a team on one PostgreSQL shares them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa

from campaignctl.adapters.store_engine import utc_now
from campaignctl.adapters.store_schema import campaigns, node_marks
from campaignctl.core.base.clock import read_time
from campaignctl.core.decisions.action_records import ClearNode, NodeSuspect
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.nodes.ledger import CLEARED, FORGIVEN, PROBE, NodeMark, probing_of
from campaignctl.core.slurm import job_ref

Marks = tuple[Callable[[Decision], str], str]  # the cluster of each decision's attempt, and the user
HORIZON = timedelta(days=60)  # marks older than this weigh nothing at any sane half-life: not read


def insert_marks(conn: sa.Connection, cluster: Callable[[Decision], str], user: str, campaign_id: int,
                 decided: Sequence[tuple[int, Decision]], at: str) -> None:
    """The ledger rows of the enforced `suspect_node` and `clear_node` decisions among `decided`
    (decision id, decision), each under the cluster its attempt ran on (`cluster`)."""
    rows = []
    for decision_id, d in decided:
        rows += [(cluster(d), node, PROBE, 0.0, decision_id, f"probe: task {d.task_index} ({d.action})")
                 for node in probing_of(d)]
        match d.typed:
            case NodeSuspect(node=node, kind=kind, weight=weight) if node:
                rows.append((cluster(d), node, kind, weight, decision_id, d.reason))
            case ClearNode(node=node) if node:
                rows.append((cluster(d), node, CLEARED, 0.0, decision_id, d.reason))
    if rows:
        conn.execute(node_marks.insert(), [
            {"cluster": on, "node": node, "at": at, "kind": kind, "weight": weight, "campaign_id": campaign_id,
             "decision_id": decision_id, "user_name": user, "reason": reason}
            for on, node, kind, weight, decision_id, reason in rows])


def attempt_cluster(array_job_of: Mapping[str, str | None], default: str) -> Callable[[Decision], str]:
    """The cluster a decision's attempt ran on: its job id's qualifier (core/slurm/job_ref.py), else
    `default`, the cluster SLURM_CONF names."""
    return lambda d: job_ref.cluster_of(str(d.inputs.get("job_id") or array_job_of.get(d.attempt_token) or "")
                                        ) or default


class NodeMarks:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def marks(self, cluster: str, now: datetime) -> list[NodeMark]:
        """The cluster's marks of the last HORIZON, oldest first."""
        return self.recent(now).get(cluster, [])

    def recent(self, now: datetime) -> dict[str, list[NodeMark]]:
        """Every cluster's marks of the last HORIZON, oldest first (a tick asks Slurm its cluster's
        name only when there are any)."""
        since = (now - HORIZON).isoformat(timespec="seconds")
        query = (sa.select(node_marks.c.cluster, node_marks.c.node, node_marks.c.at, node_marks.c.kind,
                           node_marks.c.weight, campaigns.c.name, node_marks.c.user_name, node_marks.c.reason)
                 .select_from(node_marks.outerjoin(campaigns, campaigns.c.id == node_marks.c.campaign_id))
                 .where(node_marks.c.at >= since)
                 .order_by(node_marks.c.at, node_marks.c.id))
        out: dict[str, list[NodeMark]] = {}
        with self.engine.connect() as conn:
            for cluster, node, at, kind, weight, name, user, reason in conn.execute(query):
                out.setdefault(cluster, []).append(NodeMark(node, read_time(at), kind, float(weight), name or "",
                                                            user, reason))
        return out

    def forgive(self, cluster: str, node: str, user: str, reason: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(node_marks.insert().values(cluster=cluster, node=node, at=utc_now(), kind=FORGIVEN,
                                                    weight=0.0, campaign_id=None, decision_id=None,
                                                    user_name=user, reason=reason))
