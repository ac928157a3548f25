"""Each packed task's fate, from its own job step. The tasks of a pack run as steps of one array
element (`srun --overlap -J <attempt token> …`, core/pack_plan.py), so sacct prints one line per
task under the element, named by the task's attempt token (the JobName of a step is its `-J`),
with the step's own state, exit code, elapsed time and MaxRSS: a task killed by its step's memory
limit is OUT_OF_MEMORY there while its neighbours' steps are COMPLETED, and the element itself is
COMPLETED (checked on the lab, 22.05). `core/slurm/sacct.observe_jobs` reads those steps by token.

A packed task is counted at its share of the element's allocation: AllocTRES divided by the
tasks the element runs, so a pack's GPU-hours are counted once, not once per task."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from campaignctl.core.base.units import parse_mem_mb
from campaignctl.core.model.records import HistoryRow
from campaignctl.core.model.slurm_states import TERMINAL, State
from campaignctl.core.pack_plan import PackShape, allocation
from campaignctl.core.packing.inline_fates import inline_step
from campaignctl.core.resources import Resources
from campaignctl.core.slurm.observe import key_of
from campaignctl.core.slurm.sacct import Observed
from campaignctl.core.slurm.sacct_records import JobObservation

# a step of these ended because its element did: the element's fate is the task's
_ENDED_WITH_ELEMENT = (State.CANCELLED, State.RUNNING, State.PENDING)


def packed_observations(rows: Iterable[HistoryRow], observed: Observed,
                        packed: Mapping[str, tuple[PackShape, int]],
                        inline_files: Callable[[HistoryRow], tuple[object, object]] | None = None,
                        ) -> dict[str, JobObservation]:
    """By attempt token, what each packed task of `rows` is, from its step and its element;
    `packed`: by submission token, its shape and its tasks. A task of a plain-process pack has no
    step: `inline_files` reads its started.json and exit.json instead (core/packing/inline_fates.py),
    for the tasks of elements that have started. A row whose element sacct does not list is left
    to the element's absence (core/slurm/observe.py)."""
    out = {}
    for row in rows:
        shape = packed.get(row.submission_token)
        element = observed.get(key_of(row)) if shape else None
        if shape is None or element is None:
            continue
        tasks = min(shape[0].per_element, shape[1] - row.array_index * shape[0].per_element)
        step = observed.steps.get(row.token)
        if shape[0].processes and inline_files is not None:  # no step: its files, once its element started
            step = inline_step(element, *inline_files(row)) if element.state is not State.PENDING else None
            if step is not None and step.state is State.RUNNING and element.state.value in TERMINAL:
                step = None  # started, never ended, in an element that has: the element's fate
        out[row.token] = packed_observation(element, step, max(1, tasks))
    return out


def packed_observation(element: JobObservation, step: JobObservation | None, tasks: int) -> JobObservation:
    """One packed task of an element running `tasks`: its step's state, exit, times and memory
    once it has a step, the element's before (pending, starting) or when the element's end ended
    it (a time limit, a node failure, a preemption, a person's scancel); its share of the
    element's allocation and energy either way. An element that COMPLETED without this task's
    step ever being recorded never ran the task: FAILED."""
    shared = replace(element, alloc_tres=share_of_tres(element.alloc_tres, tasks),
                     consumed_energy_j=None if element.consumed_energy_j is None
                     else element.consumed_energy_j // tasks)
    element_ended = element.state.value in TERMINAL
    if step is None:
        if element.state is State.COMPLETED:
            return replace(shared, state=State.FAILED, slurm_state="FAILED", exit_code=None, exit_signal=None)
        return shared
    if element_ended and element.state is not State.COMPLETED and step.state in _ENDED_WITH_ELEMENT:
        return shared
    if element.state is State.COMPLETED and step.state is State.CANCELLED and not step.elapsed_s:
        # srun refused to start the step (`CANCELLED 0:64` after 0 s, the element COMPLETED: a CPU
        # binding outside the step's allocation, seen on a task/affinity site): a launch failure,
        # FAILED so that the runner's exit.json names it (launch_failed), never a person's cancel
        return replace(shared, state=State.FAILED, slurm_state=step.slurm_state, exit_code=step.exit_code,
                       exit_signal=step.exit_signal, elapsed_s=0, nodes=step.nodes or element.nodes,
                       start=step.start, end=step.end, step_states=step.step_states)
    return replace(shared, state=step.state, slurm_state=step.slurm_state, cancelled_by=step.cancelled_by,
                   exit_code=step.exit_code, exit_signal=step.exit_signal, elapsed_s=step.elapsed_s,
                   nodes=step.nodes or element.nodes, start=step.start, end=step.end, max_rss=step.max_rss,
                   step_states=step.step_states)


def sharing(latest: Iterable[tuple[str | None, bool]]) -> Counter[str]:
    """Array element → how many tasks' latest attempts (job id, packed) share it, packed ones only."""
    return Counter(job_id for job_id, packed in latest if packed and job_id)


def shared_label(job_id: str | None, tasks: int) -> str:
    """How a screen names an element `tasks` packed tasks share: `12_0 ×4` ('' for one task)."""
    return f"{job_id} ×{tasks}" if job_id and tasks > 1 else ""


def requested_share(each: Resources, shape: PackShape, tasks: int) -> str:
    """A pending packed task's share of what its element asks for, in AllocTRES's form: what a
    budget projects for it until Slurm allocates (sacct's AllocTRES, shared, then replaces it)."""
    whole = allocation(each, shape)
    text = f"cpu={whole.cpus_per_task},gres/gpu={whole.gpus},mem={whole.mem_mb}M,node=1"
    return share_of_tres(text, tasks)


def share_of_tres(text: str, tasks: int) -> str:
    """`cpu=2,gres/gpu=1,mem=1200M` shared by 4 tasks → `cpu=0.5,gres/gpu=0.25,mem=300M`."""
    if tasks <= 1 or not text:
        return text
    parts = []
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name == "mem":
            try:
                parts.append(f"mem={parse_mem_mb(value) // tasks}M")
            except ValueError:
                parts.append(part)
            continue
        try:
            parts.append(f"{name}={float(value) / tasks:g}")
        except ValueError:
            parts.append(part)
    return ",".join(parts)
