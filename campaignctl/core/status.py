"""Status rows: the store's attempts joined with one sacct observation per array element."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.efficiency import Efficiency
from campaignctl.core.ladder import NOT_PROMOTED
from campaignctl.core.observe import ABANDONED
from campaignctl.core.params import Scalar
from campaignctl.core.records import AttemptRecord, HistoryRow
from campaignctl.core.sacct import JobObservation
from campaignctl.core.slurm_states import TERMINAL, State

# Local states before Slurm has the job: recorded intent, or held until payloads are in place.
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
    last_decision: str = ""  # the latest enforced decision, e.g. "resubmit (out_of_memory) applied"
    decision_status: str = ""  # its status alone: applied, awaiting-approval, failed, …
    shadow: str = ""  # the latest shadow proposal, e.g. "give_up (failed) proposed"; it never acts
    token: str = ""  # the latest attempt's token: its output is tasks/<index>/<token>/output.log
    cpu_mean_pct: float | None = None  # telemetry of the latest attempt that has any
    rss_max_mb: float | None = None
    gpu_util_mean_pct: float | None = None
    telemetry_note: str = ""  # e.g. why there is no GPU telemetry
    spark: str = ""  # recent GPU utilisation (CPU when there is no GPU telemetry), one bar per sample
    flag: str = ""  # data_starved | gpu_idle, by the policy's utilisation thresholds
    efficiency: Efficiency | None = None  # of what Slurm allocated: the latest attempt's; cost of all
    attempt_energy_kwh: tuple[float | None, ...] = ()  # each attempt's energy, in order (None: not measured)


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
        # before Slurm: SUBMITTING, or ABANDONED once its submission was given up (never SUBMITTING
        # in a campaign that finished)
        state = obs.state.value if obs else (attempt.state if attempt.job_id is None else "UNKNOWN")
        # the latest attempt's params: a rule may have changed them (a smaller batch after a GPU OOM)
        # sacct prints ExitCode 0:0 for a job that is still running: no exit until it ended
        exit_code = obs.exit_code if obs and state in TERMINAL else None
        rows.append(TaskRow(index, attempt.params or params, state, count, attempt.job_id,
                            obs.nodes if obs else "", obs.elapsed_s if obs else None, exit_code,
                            token=attempt.token))
    return rows


def stored_rows(task_params: Mapping[int, Mapping[str, Scalar]], history: Iterable[HistoryRow]) -> list[TaskRow]:
    """One row per task as the last tick stored it, without sacct: what `status` shows, marked
    stale, when Slurm does not answer. `history` is oldest first per task."""
    latest: dict[int, tuple[HistoryRow, int]] = {}
    for row in history:
        latest[row.task_index] = (row, latest[row.task_index][1] + 1 if row.task_index in latest else 1)
    rows = []
    for index, params in sorted(task_params.items()):
        if index not in latest:
            rows.append(TaskRow(index, params, NOT_SUBMITTED, 0, None, "", None, None))
            continue
        row, count = latest[index]
        rows.append(TaskRow(index, json.loads(row.params_json) or params, row.state, count, row.job_id,
                            row.nodes, row.elapsed_s, row.exit_code if row.state in TERMINAL else None,
                            token=row.token))
    return rows


# What a task row's state can be: Slurm's, as the domain names them, and campaignctl's own
TASK_STATES = (*(s.value for s in State), NOT_SUBMITTED, "SUBMITTING", "SUBMITTED", ABANDONED, NOT_PROMOTED)


def unknown_states(states: Collection[str]) -> list[str]:
    """The `--state` values no task can be in (`FAILD`): said, not answered with "no task matches"."""
    return [s for s in states if s.upper() not in TASK_STATES]


def select_rows(rows: Iterable[TaskRow], states: Collection[str] = (), tasks: Collection[int] = ()) -> list[TaskRow]:
    """`status --state FAILED --task 4`: rows in any of `states` (case-insensitive) and `tasks`;
    an empty filter keeps every row."""
    wanted = {s.upper() for s in states}
    return [r for r in rows if (not wanted or r.state in wanted) and (not tasks or r.index in tasks)]


QUIET_STATES = (NOT_SUBMITTED, NOT_PROMOTED)  # tasks with nothing to show but their number


def collapse(rows: Sequence[TaskRow]) -> tuple[list[TaskRow], dict[str, list[int]]]:
    """Rows worth a line each, and the QUIET_STATES ones as {state: task indices}: a progressive
    campaign's 28 NOT_PROMOTED tasks are one line, not 28."""
    quiet: dict[str, list[int]] = {}
    for row in rows:
        if row.state in QUIET_STATES:
            quiet.setdefault(row.state, []).append(row.index)
    return [r for r in rows if r.state not in QUIET_STATES], quiet


def index_ranges(indices: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] → '0-2,5,7-8'."""
    spans: list[list[int]] = []
    for i in sorted(set(indices)):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def varying_keys(rows: Iterable[TaskRow]) -> list[str]:
    """The parameters whose values differ between tasks, in first-seen order: a value every task
    shares tells the rows apart no better than nothing, and costs a narrow terminal its width."""
    return varying_keys_of(row.params for row in rows)


def varying_keys_of(params: Iterable[Mapping[str, Scalar]]) -> list[str]:
    """varying_keys of parameter mappings (a results row's config, a task's)."""
    values: dict[str, set[str]] = {}
    for one in params:
        for key, value in one.items():
            values.setdefault(key, set()).add(repr(value))
    varying = [k for k, seen in values.items() if len(seen) > 1]
    return varying or list(values)[:1]


def param_text(params: Mapping[str, Scalar], keys: Sequence[str] | None = None) -> str:
    """`lr=0.00030000001 batch=64` → `lr=0.0003 batch=64` (floats to 4 significant digits); only
    `keys` when given."""
    shown = params if keys is None else {k: params[k] for k in keys if k in params}
    return " ".join(f"{k}={_value(v)}" for k, v in shown.items())


def _value(value: Scalar) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


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
