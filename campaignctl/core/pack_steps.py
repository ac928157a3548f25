"""Each packed task's fate, from its own job step. The tasks of a pack run as steps of one
allocation (`srun --exact -J <attempt token> …`, core/pack_plan.py), so sacct prints one line per
task under the pack's element, named by the task's attempt token (the JobName column of a step is
its `-J`), with the step's own state, exit code, elapsed time and MaxRSS: a task killed by its
step's memory limit is OUT_OF_MEMORY there while its neighbours' steps are COMPLETED, whatever
the pack's own line says."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from campaignctl.core.sacct import DEFAULT_READING, SACCT_FIELDS, Reading, UnreadableLine, read_sacct_line
from campaignctl.core.slurm_states import State
from campaignctl.core.units import parse_duration_seconds

_ELAPSED = SACCT_FIELDS.index("Elapsed")


@dataclass(frozen=True, slots=True)
class StepFate:
    token: str  # the packed task's attempt token (the step's name)
    job_id: str  # the step, e.g. 12_3.4
    state: State
    exit_code: int | None
    signal: int | None
    elapsed_s: int | None
    max_rss: str
    nodes: str


def step_fates(lines: Iterable[str], tokens: Collection[str],
               reading: Reading = DEFAULT_READING) -> dict[str, StepFate]:
    """The step of each of `tokens` as sacct shows it; of a token that ran in more than one step
    (its pack requeued), the last. Lines that are not such a step, or cannot be read, are passed
    over: the pack's own observation reads them."""
    fates: dict[str, StepFate] = {}
    for line in lines:
        try:
            row = read_sacct_line(line, reading)
        except UnreadableLine:
            continue
        if row.step is None or row.name not in tokens:
            continue
        elapsed = line.split("|", _ELAPSED + 1)[_ELAPSED]
        try:
            seconds: int | None = parse_duration_seconds(elapsed) if elapsed else None
        except ValueError:
            seconds = None
        fates[row.name] = StepFate(row.name, row.job_id, row.state.state, row.exit_code, row.exit_signal, seconds,
                                   row.max_rss, row.nodes)
    return fates
