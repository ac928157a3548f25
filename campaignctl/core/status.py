"""Status rows: the store's attempts joined with one sacct observation per array element."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from campaignctl.core.efficiency import Efficiency
from campaignctl.core.params import Scalar
from campaignctl.core.records import AttemptRecord
from campaignctl.core.sacct import JobObservation

# Local states before Slurm has the job: recorded intent, or held until payloads are in place.
SUBMITTING = "SUBMITTING"
NOT_SUBMITTED = "NOT_SUBMITTED"


@dataclass(frozen=True, slots=True)
class TaskRow:
    index: int
    params: Mapping[str, Scalar]
    state: str
    attempts: int
    job_id: str | None
    node: str
    elapsed_s: int | None
    exit_code: int | None
    last_decision: str = ""  # e.g. "resubmit (out_of_memory)", from the decision log
    cpu_mean_pct: float | None = None  # telemetry of the latest attempt that has any; % of ONE core
    rss_max_mb: float | None = None
    gpu_util_mean_pct: float | None = None
    telemetry_note: str = ""  # e.g. why there is no GPU telemetry
    spark: str = ""  # recent GPU utilisation (CPU when there is no GPU telemetry), one bar per sample
    flag: str = ""  # data_starved | gpu_idle, by the policy's utilisation thresholds
    efficiency: Efficiency | None = None  # of what Slurm allocated: the latest attempt's; cost of all


def _latest(attempts: Iterable[AttemptRecord]) -> dict[int, tuple[AttemptRecord, int]]:
    latest: dict[int, tuple[AttemptRecord, int]] = {}
    for attempt in attempts:
        count = latest[attempt.task_index][1] + 1 if attempt.task_index in latest else 1
        latest[attempt.task_index] = (attempt, count)
    return latest


def task_rows(task_params: Mapping[int, Mapping[str, Scalar]], attempts: Iterable[AttemptRecord],
              observed: Mapping[tuple[str, int | None], JobObservation]) -> list[TaskRow]:
    """One row per task from its latest attempt. A job id sacct does not (yet) know is UNKNOWN,
    never 'done': sacct lags squeue by a second or two, and ids can vanish from it."""
    latest = _latest(attempts)
    rows = []
    for index, params in sorted(task_params.items()):
        if index not in latest:
            rows.append(TaskRow(index, params, NOT_SUBMITTED, 0, None, "", None, None))
            continue
        attempt, count = latest[index]
        obs = _observation(attempt, observed)
        state = obs.state.value if obs else (SUBMITTING if attempt.job_id is None else "UNKNOWN")
        # the latest attempt's params: a rule may have changed them (a smaller batch after a GPU OOM)
        rows.append(TaskRow(index, attempt.params or params, state, count, attempt.job_id,
                            obs.nodes if obs else "",
                            obs.elapsed_s if obs else None, obs.exit_code if obs else None))
    return rows


def _observation(attempt: AttemptRecord,
                 observed: Mapping[tuple[str, int | None], JobObservation]) -> JobObservation | None:
    if attempt.array_job_id is None:
        return None
    return observed.get((attempt.array_job_id, attempt.array_index))


def stored_states(tasks: Iterable[int], attempts: Iterable[AttemptRecord],
                  unstarted: Callable[[int], str | None] = lambda _task: None) -> dict[str, int]:
    """Tasks by the state of their latest attempt as the store has it: the last tick's view, no sacct.
    A task without one is NOT_SUBMITTED, or what `unstarted` calls it (NOT_PROMOTED)."""
    latest = _latest(attempts)
    return dict(Counter(latest[t][0].state if t in latest else unstarted(t) or NOT_SUBMITTED
                        for t in tasks).most_common())


def count_states(rows: Iterable[TaskRow]) -> dict[str, int]:
    return dict(Counter(row.state for row in rows).most_common())


BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[float], full: float = 100.0, width: int = 20) -> str:
    """`[0, 50, 100]` → `▁▄█`: the last `width` values, scaled to `full`."""
    tail = list(values)[-width:]
    return "".join(BARS[min(len(BARS) - 1, max(0, round(v / full * (len(BARS) - 1))))] for v in tail)
