"""Heterogeneous GPU fallback: a task pending too long for lack of its GPU type moves to another
acceptable type (the spec's `gpu_type: [a100, v100]`), the cheapest one that has room now. Pure.

Slurm 22.05 cannot change a pending job's GPU type in place (`scontrol update Gres=gpu:v100:2`
on a gpu:a100 job leaves it asking for both, PENDING BadConstraints; see NOTES.md), so the move
is two-phase: this tick cancels the element only if it is still pending (`scancel
--state=PENDING`); a later tick sees it CANCELLED and resubmits it with the new type. An element
that started meanwhile just runs.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from campaignctl.core.decisions.action_records import Cancel
from campaignctl.core.decisions.decision import Decision, TaskView
from campaignctl.core.policy.policy import Policy

RULE = "gpu_fallback"
# squeue reasons that mean "waiting for capacity"; held, throttled (JobArrayTaskLimit), dependent
# or begin-time jobs wait for something a GPU type does not change.
_WAITING_FOR_NODES = ("Resources", "Priority")


@dataclass(frozen=True, slots=True)
class NodeGpus:
    node: str
    gpu_type: str
    total: int
    used: int
    usable: bool  # not down, drained or failing

    @property
    def free(self) -> int:
        return max(0, self.total - self.used) if self.usable else 0


_GRES = re.compile(r"gpu:([^:(,]+):(\d+)")
_USABLE_STATES = ("idle", "mixed", "allocated", "completing")


def parse_sinfo_gpus(text: str) -> list[NodeGpus]:
    """`sinfo -N -O NodeList:|,Gres:|,GresUsed:|,StateLong:` → typed GPUs per node, once per node.
    Gres `gpu:a100:2`, GresUsed `gpu:a100:1(IDX:0)`; a node that is down, drained or failing
    (StateLong `down*`, `drained`, `draining`, …) has no usable GPUs."""
    out: dict[tuple[str, str], NodeGpus] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 4 or not parts[0]:
            continue
        node, gres, used, state = parts[:4]
        in_use = {t: int(n) for t, n in _GRES.findall(used)}
        usable = state.rstrip("*~#!%$@^-+").lower() in _USABLE_STATES and not state.endswith("*")
        for gpu_type, total in _GRES.findall(gres):
            out[(node, gpu_type)] = NodeGpus(node, gpu_type, int(total), in_use.get(gpu_type, 0), usable)
    return list(out.values())


def free_gpus_by_type(nodes: Sequence[NodeGpus]) -> dict[str, int]:
    """Most GPUs of each type free on ONE node (a task's GPUs must be on one node)."""
    out: dict[str, int] = {}
    for n in nodes:
        out[n.gpu_type] = max(out.get(n.gpu_type, 0), n.free)
    return out


def is_waiting_for_nodes(reason: str) -> bool:
    return reason in _WAITING_FOR_NODES or reason.startswith("ReqNodeNotAvail")


def candidates(views: Sequence[TaskView], gpu_types: Sequence[str], policy: Policy, now: datetime,
               pending_since: Mapping[str, datetime], moves: Mapping[int, int],
               already: Collection[str]) -> list[TaskView]:
    """Tasks whose latest attempt has been pending on a listed GPU type for `fallback.after`."""
    fb = policy.fallback
    if not fb.after_s or len(gpu_types) < 2:
        return []
    out = []
    for view in views:
        latest = view.latest
        since = pending_since.get(latest.token)
        if (latest.state == "PENDING" and latest.resources.gpu_type in gpu_types and since is not None
                and now - since >= timedelta(seconds=fb.after_s) and latest.token not in already
                and moves.get(view.index, 0) < fb.max_moves):
            out.append(view)
    return out


def plan_fallbacks(waiting: Sequence[TaskView], gpu_types: Sequence[str], policy: Policy,
                   reasons: Mapping[str, str], free: Mapping[str, int]) -> list[Decision]:
    """A `cancel` decision per waiting task that has a better type with room now; `reasons` maps
    `<array>_<index>` to squeue's pending reason."""
    out = []
    free = dict(free)  # each move takes its GPUs from what is free
    for view in waiting:
        latest = view.latest
        reason = reasons.get(latest.job_id or "", "")
        if not is_waiting_for_nodes(reason):
            continue
        res = latest.resources
        if res.nodes > 1:
            # `free` is the most GPUs of a type free on ONE node: it cannot say whether `nodes`
            # nodes have room each, and a move that does not start the task sooner is a loss
            continue
        hours = res.time_min / 60
        options = sorted((policy.prices.gpu(t) * res.gpus * hours, gpu_types.index(t), t) for t in gpu_types
                         if t != res.gpu_type and free.get(t, 0) >= res.gpus)
        if not options:
            continue  # no other type has room either: moving would not start it sooner
        cost, _, target = options[0]
        seen = dict(free)  # before this move takes its GPUs: what the decision saw
        free[target] -= res.gpus
        new = replace(res, gpu_type=target)
        was = policy.prices.gpu(res.gpu_type) * res.gpus * hours
        reason_text = (f"pending on {res.gpu_type} ({reason}) since it was submitted; {target} has "
                       f"{seen[target]} GPU(s) free on a node, so it is cancelled while still pending "
                       f"and resubmitted with gpu_type {res.gpu_type} → {target}"
                       + (f" (at most {cost:.2f} vs {was:.2f} at its time limit)." if cost or was else "."))
        out.append(Decision(
            view.index, latest.token, RULE, "cancel", reason_text,
            {"job_id": latest.job_id, "attempt": latest.number, "state": latest.state, "pending_reason": reason,
             "free_gpus": seen, "prices": {t: policy.prices.gpu(t) for t in gpu_types}},
            Cancel(changes={"gpu_type": (res.gpu_type, target)}, replacement=new, only_if="PENDING"),
            new))
    return out
