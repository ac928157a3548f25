"""A plain-process pack's task, as sacct would have shown its step: read from the files its
element's runner writes (adapters/inline_pack.py) — started.json once it starts, exit.json when
it ends — since no step, and no accounting row, exists for it. The element's own sacct line
still gives the pending and the end that ended every task in it (core/packing/pack_fates.py).

exit.json's return code and cause map to the state a step would have had: 0 COMPLETED; the
runner's own `time_limit` TIMEOUT and `out_of_memory` OUT_OF_MEMORY (so the default policy's
answers — more time, more memory — apply unchanged), `stopped` CANCELLED; any other code FAILED,
-N as signal N."""

from __future__ import annotations

import time
from dataclasses import replace

from campaignctl.core.model.slurm_states import State
from campaignctl.core.slurm.sacct_records import JobObservation

TIME_LIMIT = "time_limit"  # the runner ended the task at its own time limit
OUT_OF_MEMORY = "out_of_memory"  # the runner (or the kernel, in the element's cgroup) ended it for memory
STOPPED = "stopped"  # a stop or cancel decision asked (its stop.request): what scancel of a step is

_BY_CAUSE = {TIME_LIMIT: State.TIMEOUT, OUT_OF_MEMORY: State.OUT_OF_MEMORY, STOPPED: State.CANCELLED}


def inline_step(element: JobObservation, started: object, ended: object) -> JobObservation | None:
    """The task's step-like observation from its started.json and exit.json values (None for a
    missing or unreadable file); None when it has not started (its element's state stands)."""
    if isinstance(ended, dict) and _number(ended.get("returncode")) is not None:
        code = int(ended["returncode"])
        cause = ended.get("cause")
        state = State.COMPLETED if code == 0 else _BY_CAUSE.get(cause, State.FAILED) if isinstance(cause, str) \
            else State.FAILED
        began, done = _number(ended.get("started_at")), _number(ended.get("ended_at"))
        return replace(element, state=state, slurm_state=state.value, cancelled_by=None,
                       exit_code=max(code, 0), exit_signal=-code if code < 0 else 0,
                       elapsed_s=int(done - began) if began is not None and done is not None else None,
                       nodes=_node(ended) or element.nodes, start=_stamp(began), end=_stamp(done),
                       max_rss="", step_states=())
    if isinstance(started, dict):
        began = _number(started.get("started_at"))
        return replace(element, state=State.RUNNING, slurm_state="RUNNING", nodes=_node(started) or element.nodes,
                       start=_stamp(began), end=None, step_states=())
    return None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _node(data: dict) -> str:
    node = data.get("node")
    return node if isinstance(node, str) else ""


def _stamp(seconds: float | None) -> str | None:
    """sacct's form of a time (`2026-11-30T14:05:09`, in UTC: every Slurm call here runs with TZ=UTC)."""
    return None if seconds is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
