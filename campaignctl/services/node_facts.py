"""The node ledger as a tick reads it: the cluster's marks (one query), the partition's nodes (one
sinfo, only when the ledger would exclude something) and `sbatch --test-only` of the spec's request
with them left out. It fails open: a ledger that cannot be read, or an exclusion Slurm would
refuse a job for, excludes nothing, and says why."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import sqlalchemy as sa

from campaignctl.adapters import slurm
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import CampaignctlError
from campaignctl.core.nodes.ledger import WATCHED, Exclusion, exclusion, leaving_out, standings
from campaignctl.core.nodes.node_rules import NodeRules
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.services.submit_checks import refusal_of


def ledger_exclusion(store: Store, rules: NodeRules, read_spec: Callable[[], CampaignSpec], now: datetime) -> Exclusion:
    """The spec is read (and sinfo and --test-only asked) only when the ledger would exclude a node."""
    try:
        recent = store.nodes.recent(now)
        ranked = standings(recent.get(slurm.cluster_name(), []), now, rules) if recent else []
        if all(s.state == WATCHED for s in ranked):
            return Exclusion()
        spec = read_spec()
        found = exclusion(ranked, slurm.partition_nodes(spec.resources.partition), rules)
        left_out = found.for_array(2)
        if left_out and (refused := refusal_of(spec, leaving_out(spec.resources, left_out))):
            return Exclusion(note=f"Slurm would refuse a job leaving out {', '.join(left_out)} ({refused}): "
                                  "the node ledger excludes nothing this tick")
        return found
    except (sa.exc.SQLAlchemyError, CampaignctlError, OSError) as exc:  # fail open: never block a submission
        return Exclusion(note=f"the node ledger could not be read ({type(exc).__name__}: {exc}): it excludes nothing")
