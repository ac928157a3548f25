"""What placement and moving read, rebuilt for `policy replay` from the decisions that recorded it
(core/governance/replay.py). Pure. A tick's predictions are in its start decisions' placement and
in its move decisions; squeue's estimates only in the move decisions, so in replay an element no
recorded move names is not moved."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from campaignctl.core.decisions.recorded import RecordedDecision
from campaignctl.core.placement.moves import ASKED, MoveFacts
from campaignctl.core.placement.placement import Prediction, prediction_from
from campaignctl.core.resources import Resources
from campaignctl.core.slurm import job_ref
from campaignctl.core.spec.clusters_spec import ClusterSpec
from campaignctl.core.tick.starts import StartFacts


def _predictions(inputs: object) -> dict[str, Prediction]:
    return {str(c): prediction_from(p) for c, p in inputs.items()} if isinstance(inputs, dict) else {}


def recorded_placement(facts: StartFacts, starts: Sequence[RecordedDecision],
                       clusters: tuple[ClusterSpec, ...]) -> StartFacts:
    """`facts` with the clusters and the predictions the tick's first placed start recorded."""
    placed = next((p for d in starts if isinstance(p := d.inputs.get("placement"), dict)), None)
    if not clusters or placed is None:
        return facts
    return replace(facts, clusters=clusters, predictions=_predictions(placed.get("predictions")),
                   ledger_cluster=str(placed.get("ledger_cluster", "")))


def recorded_moves(moves: Sequence[RecordedDecision], clusters: tuple[ClusterSpec, ...]) -> MoveFacts:
    """The move facts of one tick, as far as its move decisions recorded them."""
    first = moves[0].inputs if moves else {}
    asked = first.get("asked")
    base = Resources(**{k: v for k, v in asked.items() if k in ASKED}) if isinstance(asked, dict) \
        else Resources()
    queued = {str(d.inputs.get("job_id")): (str(d.inputs.get("expected_start") or "N/A"),
                                            str(d.inputs.get("pending_reason", ""))) for d in moves}
    default = str(first.get("default_cluster", ""))
    answered = frozenset(str(d.inputs.get("cluster", "")) for d in moves) | {
        job_ref.cluster_of(j) or default for j in queued}
    return MoveFacts(clusters, base, default, answered, queued, _predictions(first.get("predictions")))
