"""Placement: which of a campaign's clusters (`clusters:`) each new array goes to. Pure.

Each cluster's prediction is when its slurmctld would start one element now (`sbatch -M <c>
--test-only`, read once per tick with new arrays: services/placement_facts.py), or why it would not
(a refusal — every node of the partition drained — or no answer: its slurmctld is down). An array
goes where the predicted start is earliest; predictions within TIE_S of the earliest are a tie,
broken by the fewest elements this tick has already placed there (so equal idle clusters share the
tick's arrays), then by the spec's order. A cluster that refuses or does not answer gets nothing
while another would start it; if none would, the array goes to the first cluster that answered
(its sbatch is refused and retried later, as any refused submission), else to the spec's first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.base.clock import read_time
from campaignctl.core.slurm.clusters import UNREACHABLE

TIE_S = 60  # predictions this close are the same start: --test-only's answer moves by seconds per call


@dataclass(frozen=True, slots=True)
class Prediction:
    """When one cluster would start an element now (`start`, UTC ISO), or why not (`why`)."""

    start: str | None = None
    why: str = ""

    def to_evidence(self) -> dict[str, str]:
        return {"start": self.start} if self.start else {"why": self.why}


def prediction_from(value: object) -> Prediction:
    """A recorded prediction (`to_evidence`), for replay."""
    if isinstance(value, Mapping):
        start, why = value.get("start"), value.get("why")
        return Prediction(start if isinstance(start, str) else None, why if isinstance(why, str) else "")
    return Prediction(None, "not recorded")


@dataclass(frozen=True, slots=True)
class Placement:
    cluster: str
    why: str
    evidence: dict[str, object]


class Placer:
    """Places a tick's new arrays one after another (`place`), counting what it placed where."""

    def __init__(self, clusters: Sequence[str], predictions: Mapping[str, Prediction]) -> None:
        self.clusters = tuple(clusters)
        self.predictions = predictions
        self.placed = dict.fromkeys(self.clusters, 0)

    def place(self, elements: int) -> Placement:
        seen = {c: self.predictions.get(c, Prediction(None, "no prediction")) for c in self.clusters}
        starting = {c: read_time(p.start).timestamp() for c, p in seen.items() if p.start}
        evidence: dict[str, object] = {"predictions": {c: p.to_evidence() for c, p in seen.items()},
                                       "placed_this_tick": dict(self.placed)}
        if starting:
            earliest = min(starting.values())
            tied = [c for c in self.clusters if c in starting and starting[c] - earliest <= TIE_S]
            chosen = min(tied, key=lambda c: (self.placed[c], self.clusters.index(c)))
            why = (f"{chosen} would start it soonest ({seen[chosen].start})" if len(tied) == 1 else
                   f"{', '.join(tied)} would start it alike ({seen[chosen].start}); {chosen} has had the fewest "
                   f"elements placed this tick")
            others = [f"{c}: {p.why}" for c, p in seen.items() if not p.start]
            why += f"; {'; '.join(others)}" if others else ""
        else:
            answering = [c for c, p in seen.items() if p.why != UNREACHABLE]
            chosen = answering[0] if answering else self.clusters[0]
            why = (f"no cluster would start it now ({'; '.join(f'{c}: {p.why}' for c, p in seen.items())}); "
                   f"sent to {chosen}, where a refused submission is tried again later")
        self.placed[chosen] += elements
        return Placement(chosen, why, {**evidence, "chosen": chosen})

