"""What `campaignctl top` shows, read from the store only: no Slurm call on a refresh (the ticks stay
with cron, and a screen left open all day must not add RPCs to a busy controller). The task rows are
as the last tick stored them; the view says when that tick ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from campaignctl.adapters.decision_log import LoggedDecision
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import CampaignctlError
from campaignctl.core.nodes.ledger import described, standings
from campaignctl.core.nodes.node_rules import NodeRules
from campaignctl.services.campaigns import current_policy, find_campaign
from campaignctl.services.results import results
from campaignctl.services.status import StatusResult, status

LAST_DECISIONS = 8


@dataclass(frozen=True, slots=True)
class TopView:
    status: StatusResult
    decisions: list[LoggedDecision] = field(default_factory=list)  # the newest first
    best: str = ""  # the objective's best so far, one line
    nodes: list[str] = field(default_factory=list)  # nodes the ledger holds against, one line each
    read_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


def top_view(name: str | None) -> TopView:
    """One campaign's view (all campaigns' with `name` None)."""
    shown = status(name, ask_slurm=False)
    if name is None:
        return TopView(shown)
    store = Store.open()
    record = find_campaign(store, name)
    entries = store.log.entries(record.id)
    policy, _ = current_policy(store, record)
    return TopView(shown, [e for e in reversed(entries) if e.mode == "enforce"][:LAST_DECISIONS],
                   _best(name), _node_problems(store, policy.nodes))


def _best(name: str) -> str:
    try:
        ranked = results(name)
    except CampaignctlError:  # nothing reported yet, no metric to rank by
        return ""
    winner = next((c for c in ranked.configs if c.rank == 1), None)
    if ranked.metric is None or winner is None:
        return ""
    value = winner.final if ranked.by == "last" else winner.best
    params = " ".join(f"{k}={v}" for k, v in winner.params.items())
    return f"best {ranked.metric} ({ranked.goal}) so far: {value:g}, config {winner.config} ({params})"


def _node_problems(store: Store, rules: NodeRules) -> list[str]:
    now = datetime.now(timezone.utc)
    return [f"{cluster}/{s.node}: {s.state}, {described(s)}"
            for cluster, marks in sorted(store.nodes.recent(now).items())
            for s in standings(marks, now, rules)]
