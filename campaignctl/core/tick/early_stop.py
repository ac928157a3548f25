"""Early stopping by the median stopping rule (Golovin et al., "Google Vizier", KDD 2017; Ray
Tune's MedianStoppingRule): stop a running task whose metric trails its peers'. Pure.

At the latest step s a running task has reported (s ≥ `grace_steps`), its best value up to s is
compared with the median of its peers' best values up to s. Peers are the other tasks of the same
rung (every task, without rungs), running or finished, that reported the metric at s or later, so
each is judged at the same point of training. With at least `min_peers` of them, a value strictly
worse than the median stops the task (a tie does not). The decision fires once per attempt and
answers it: the attempt that then shows CANCELLED is settled, never retried.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.decisions.action_records import Stop
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.model.training_metrics import Curve, best_until, better, describe, last_step, median
from campaignctl.core.policy.policy_sections import EarlyStopping

RULE = "early_stopping"
ACTION = "stop"


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a task stands among its peers at its latest step."""

    step: int
    value: float  # its best up to `step`
    peers: Mapping[int, float]  # peer task index → its best up to `step`
    median: float | None  # of the peers' values; None without peers

    def trails(self, goal: str) -> bool:
        """Strictly worse than the median: the median is better than the task's value."""
        return self.median is not None and better(self.median, self.value, goal)


def stoppable(views: Sequence[TaskView], fired: Collection[tuple[str, str]]) -> list[TaskView]:
    """Tasks whose latest attempt runs and has not been stopped (nor proposed to be) already."""
    return [v for v in views if v.latest.state == "RUNNING" and v.latest.job_id and not v.latest.decided
            and (v.latest.token, RULE) not in fired]


def standing(task: int, curves: Mapping[int, Curve], rungs: Mapping[int, int], goal: str) -> Standing | None:
    """None when the task has reported nothing yet."""
    curve = curves.get(task, ())
    step = last_step(curve)
    value = best_until(curve, step, goal) if step is not None else None
    if step is None or value is None:
        return None
    rung = rungs.get(task, 0)
    peers = {}
    for other, peer_curve in curves.items():
        if other == task or rungs.get(other, 0) != rung or (last_step(peer_curve) or -1) < step:
            continue
        peer_value = best_until(peer_curve, step, goal)
        if peer_value is not None:  # a peer whose first report came after `step` has nothing to compare
            peers[other] = peer_value
    return Standing(step, value, peers, median(list(peers.values())) if peers else None)


def decide_early_stops(views: Sequence[TaskView], curves: Mapping[int, Curve], rungs: Mapping[int, int],
                       section: EarlyStopping, fired: Collection[tuple[str, str]]) -> list[Decision]:
    """One `stop` decision per running task that trails the median of its peers; `curves` of the
    section's metric by task index (every task, finished ones too), `rungs` by task index
    (missing: rung 0), `fired` the (attempt token, rule) pairs decided on earlier ticks."""
    if not section.enabled:
        return []
    out = []
    for view in stoppable(views, fired):
        seen = standing(view.index, curves, rungs, section.goal)
        if (seen is not None and seen.step >= section.grace_steps and len(seen.peers) >= section.min_peers
                and seen.trails(section.goal)):
            out.append(_stop(view, seen, rungs.get(view.index, 0), section))
    return out


def _stop(view: TaskView, seen: Standing, rung: int, section: EarlyStopping) -> Decision:
    latest, metric = view.latest, section.metric
    reason = (f"{metric} {seen.value:.4g} at step {seen.step} is worse than the median {seen.median:.4g} of "
              f"{len(seen.peers)} peers at that step ({'lower' if section.goal == 'min' else 'higher'} is better); "
              f"stopped (median rule).")
    inputs = {"job_id": latest.job_id, "attempt": latest.number, "state": latest.state, "metric": metric,
              "goal": section.goal, "step": seen.step, "value": seen.value, "median": seen.median,
              "peers": describe(seen.peers), "peer_count": len(seen.peers), "rung": rung,
              "grace_steps": section.grace_steps, "min_peers": section.min_peers}
    return Decision(view.index, latest.token, RULE, ACTION, reason, inputs, Stop(only_if="RUNNING"))
