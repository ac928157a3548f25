"""The crash-loop breaker: the same failure, attempt after attempt, is not something another retry
fixes. When the last `crash_loop_after` failures of one task, or of the whole campaign in the order
they ended with nothing completing in between, share a signature, the tick holds the campaign (its
pending elements held, nothing retried) with the signature in the reason, instead of retrying
until every task's budget is spent. Pure.

A signature is the failure's cause (or its state and exit code) and a digest of its evidence
with what differs between two runs of the same failure taken out: numbers (times, PIDs, addresses,
steps), the `[rank N on node]` prefix of a multi-node attempt's lines, and runs of spaces. Causes
the policy answers by changing the task (more memory, more time, smaller parameters: OOM and
TIMEOUT states, a GPU OOM) are not loops: each retry differs; nor are a GPU's hardware errors
(the node ledger's, core/nodes/evidence.py). Across tasks only failures whose output named a cause
count: two tasks that both exited 1 without a word may have nothing in common, a traceback the
site's pattern matched twice does. The attempts a crash-loop hold stopped do not count again after
`resume`: N new failures alike hold it again."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from campaignctl.core.base.clock import read_time
from campaignctl.core.decisions.action_records import Hold
from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.policy.output_causes import GPU_HARDWARE, GPU_OOM
from campaignctl.core.policy.suspects import RANK_PREFIX
from campaignctl.core.tick.budget import CAMPAIGN_TASK, CAMPAIGN_TOKEN, pending_elements

RULE = LEVEL = "crash_loop"
LOOPING_STATES = ("FAILED",)  # retried as they are (OOM and TIMEOUT are resized; node failures are the ledger's)
_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|\d+")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Failure:
    task: int
    attempt: AttemptView
    signature: str


def signature(a: AttemptView) -> str:
    """`cause:digest`, e.g. `bad_shard:3f2a9c01d4e7`, or `FAILED exit 3:…` where no cause was named."""
    text = RANK_PREFIX.sub("", a.evidence or "")
    text = _SPACES.sub(" ", _VARIABLE.sub("#", text)).strip()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    head = a.cause or f"{a.state} exit {a.exit_code if a.exit_code is not None else '?'}"
    return f"{head}:{digest}"


def failures(views: Sequence[TaskView]) -> list[Failure]:
    """The campaign's ended failures a retry repeats as they are, in the order they ended."""
    out = [Failure(v.index, a, signature(a)) for v in views for a in v.attempts
           if a.state in LOOPING_STATES and a.ended_at and a.cause not in (GPU_OOM, GPU_HARDWARE)]
    return sorted(out, key=lambda f: (read_time(f.attempt.ended_at or ""), f.task, f.attempt.number))


def crash_loop(views: Sequence[TaskView], after: int, stopped: frozenset[str],
               last_completed: str | None = None) -> Decision | None:
    """A hold when `after` failures in a row share a signature and one of them is answered now
    (not yet decided); `stopped`: attempts an earlier crash-loop hold already counted;
    `last_completed`: when the campaign's latest completed attempt ended (None: none has)."""
    if after <= 0:
        return None
    fresh = [f for f in failures(views) if f.attempt.token not in stopped]
    since = read_time(last_completed) if last_completed else None
    named = [f for f in fresh if f.attempt.cause and f.attempt.evidence
             and (since is None or read_time(f.attempt.ended_at or "") > since)]
    by_task: dict[int, list[Failure]] = {}
    for f in fresh:
        by_task.setdefault(f.task, []).append(f)
    runs = [named[-after:]] + [by_task[v.index][-after:] for v in views if v.index in by_task]
    for run in runs:
        if len(run) == after and len({f.signature for f in run}) == 1 and any(not f.attempt.decided for f in run):
            return _hold(views, run, after)
    return None


def _hold(views: Sequence[TaskView], run: Sequence[Failure], after: int) -> Decision:
    sig = run[0].signature
    tasks = sorted({f.task for f in run})
    whose = f"task {tasks[0]}" if len(tasks) == 1 else f"tasks {', '.join(map(str, tasks))}"
    arrays = pending_elements(views)
    line = (run[-1].attempt.evidence or "").splitlines()[0][:200] if run[-1].attempt.evidence else ""
    reason = (f"crash loop: {after} failures in a row ({whose}) with the same signature {sig}"
              f"{f' ({line})' if line else ''}; retrying it again would fail the same way, so nothing is "
              f"retried and {sum(len(i) for i in arrays.values())} pending element(s) are held (fix the "
              "cause, submit the spec again, then `campaignctl resume`).")
    inputs = {"signature": sig, "failures": [{"task": f.task, "attempt": f.attempt.number, "job_id": f.attempt.job_id,
                                              "state": f.attempt.state, "exit_code": f.attempt.exit_code,
                                              "nodes": f.attempt.nodes, "ended_at": f.attempt.ended_at}
                                             for f in run],
              "evidence": run[-1].attempt.evidence}
    return Decision(CAMPAIGN_TASK, CAMPAIGN_TOKEN, RULE, "hold", reason, inputs,
                    Hold(arrays={a: tuple(i) for a, i in arrays.items()}, level=LEVEL, signature=sig,
                         attempts=tuple(f.attempt.token for f in run)))
