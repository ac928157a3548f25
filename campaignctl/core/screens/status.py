"""Status rows: the store's attempts joined with one sacct observation per array element."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from campaignctl.core.model.params import Scalar
from campaignctl.core.model.records import AttemptRecord, HistoryRow
from campaignctl.core.model.slurm_states import TERMINAL, State
from campaignctl.core.packing.pack_fates import packed_observation, sharing
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.observe import ABANDONED, FINAL, params_parser
from campaignctl.core.slurm.sacct import element_key
from campaignctl.core.slurm.sacct_records import JobObservation
from campaignctl.core.tuning.ladder import NOT_PROMOTED
from campaignctl.core.tuning.search import NOT_ASKED
from campaignctl.core.usage.efficiency import Efficiency

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
    shared: int = 1  # tasks whose latest attempts share its array element (packed, core/pack_plan.py)
    cluster: str = ""  # where its latest attempt was submitted, for a campaign with `clusters:` ('' otherwise)


# States Slurm does not leave on its own: `status` shows an attempt the last tick stored in one as
# stored, without asking sacct for it (a job requeued by hand after it ended shows its new run once
# the next tick has seen it). Slurm requeues NODE_FAIL, BOOT_FAIL and PREEMPTED jobs itself
# (JobRequeue, --requeue), so those are asked.
SETTLED = FINAL - {"NODE_FAIL", "BOOT_FAIL", "PREEMPTED"}
# States in which Slurm, not the program, ended the job: sacct's ExitCode is then 0:0 (a TIMEOUT
# reads `TIMEOUT|0:0`), which is no exit status of the program's
ENDED_BY_SLURM = frozenset({"TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})


def shown_exit(state: str, code: int | None) -> int | None:
    """The exit code a screen shows: none while the job runs (sacct prints 0:0 for a running
    job), nor a 0 for a job Slurm ended."""
    if state not in TERMINAL or (state in ENDED_BY_SLURM and code == 0):
        return None
    return code


def live(history: Iterable[HistoryRow]) -> list[HistoryRow]:
    """The attempts whose state sacct may tell differently from the store."""
    return [row for row in history if row.state not in SETTLED]


def task_rows(unstarted: Mapping[int, Mapping[str, Scalar]], history: Iterable[HistoryRow],
              observed: Mapping[tuple[str, int | None], JobObservation], stale: bool = False,
              steps: Mapping[str, JobObservation] | None = None) -> list[TaskRow]:
    """One row per task from its latest attempt (`history` is oldest first per task): as sacct
    shows it now, as the last tick stored it when settled (or `stale`: Slurm did not answer), and
    UNKNOWN, never 'done', for a job id sacct does not (yet) know: sacct lags squeue by a second or
    two, and ids can vanish from it. `unstarted` holds the params of tasks with no attempt. A
    packed attempt is as its own step shows it (`steps`, by attempt token; core/packing/pack_fates.py)."""
    latest: dict[int, tuple[HistoryRow, int]] = {}
    for row in history:
        latest[row.task_index] = (row, latest[row.task_index][1] + 1 if row.task_index in latest else 1)
    parse = params_parser()
    rows = [TaskRow(index, params, NOT_SUBMITTED, 0, None, "", None, None) for index, params in unstarted.items()
            if index not in latest]
    sharers = sharing((row.job_id, row.packed) for row, _ in latest.values())
    for index, (row, count) in latest.items():
        # the latest attempt's params: a rule may have changed them (a smaller batch after a GPU OOM)
        params = parse(row.params_json)
        key = element_key(row.job_id) if row.job_id else None
        obs = observed.get(key) if key is not None else None
        if obs is not None and row.packed:
            obs = packed_observation(obs, (steps or {}).get(row.token), 1)
        shared = sharers.get(row.job_id, 1) if row.job_id is not None else 1
        if obs is not None:
            state = obs.state.value
            rows.append(TaskRow(index, params, state, count, row.job_id, obs.nodes, obs.elapsed_s,
                                shown_exit(state, obs.exit_code), token=row.token, shared=shared))
        elif stale or row.state in SETTLED or row.job_id is None:
            # before Slurm: SUBMITTING, or ABANDONED once its submission was given up
            rows.append(TaskRow(index, params, row.state, count, row.job_id, row.nodes, row.elapsed_s,
                                shown_exit(row.state, row.exit_code), token=row.token, shared=shared))
        else:
            rows.append(TaskRow(index, params, "UNKNOWN", count, row.job_id, "", None, None, token=row.token,
                                shared=shared))
    rows.sort(key=_index)
    return rows


def _index(row: TaskRow) -> int:
    return row.index


# What a task row's state can be: Slurm's, as the domain names them, and campaignctl's own
TASK_STATES = (*(s.value for s in State), NOT_SUBMITTED, "SUBMITTING", "SUBMITTED", ABANDONED, NOT_PROMOTED,
               NOT_ASKED)


def unknown_states(states: Collection[str]) -> list[str]:
    """The `--state` values no task can be in (`FAILD`): said, not answered with "no task matches"."""
    return [s for s in states if s.upper() not in TASK_STATES]


def select_rows(rows: Iterable[TaskRow], states: Collection[str] = (), tasks: Collection[int] = ()) -> list[TaskRow]:
    """`status --state FAILED --task 4`: rows in any of `states` (case-insensitive) and `tasks`;
    an empty filter keeps every row."""
    wanted = {s.upper() for s in states}
    return [r for r in rows if (not wanted or r.state in wanted) and (not tasks or r.index in tasks)]


QUIET_STATES = (NOT_SUBMITTED, NOT_PROMOTED, NOT_ASKED)  # tasks with nothing to show but their number


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


WHOLE_DIGITS = 8  # a float that this many significant digits hold exactly is shown whole


def float_digits(values: Iterable[object]) -> int:
    """Significant digits for one parameter's floats shown side by side: every value whole when
    at most WHOLE_DIGITS hold it (0.000654321), else 4 (0.1 * 0.003 = 0.00030000000000000003
    → 0.0003), and always enough that two different values never look the same (a sampler's
    0.00065432198 and 0.00065432111)."""
    floats = {v for v in values if isinstance(v, float) and math.isfinite(v)}
    whole = next((n for n in range(1, WHOLE_DIGITS + 1) if all(float(f"{v:.{n}g}") == v for v in floats)), 4)
    return next(n for n in range(max(4, whole), 18) if len({f"{v:.{n}g}" for v in floats}) == len(floats))


def param_digits(params: Iterable[Mapping[str, Scalar]]) -> dict[str, int]:
    """float_digits per parameter name, over every row of a table."""
    values: dict[str, list[Scalar]] = {}
    for one in params:
        for key, value in one.items():
            values.setdefault(key, []).append(value)
    return {key: float_digits(seen) for key, seen in values.items()}


def param_text(params: Mapping[str, Scalar], keys: Sequence[str] | None = None,
               digits: Mapping[str, int] | None = None) -> str:
    """`lr=0.000654321 batch=64`: only `keys` when given; floats to `digits` (param_digits of
    the table the text is shown in; alone, of this one row)."""
    shown = params if keys is None else {k: params[k] for k in keys if k in params}
    return " ".join(f"{k}={shown_value(v, (digits or {}).get(k) or float_digits([v]))}" for k, v in shown.items())


def shown_value(value: object, digits: int) -> str:
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def stored_states(tasks: Iterable[int], attempts: Iterable[AttemptRecord],
                  unstarted: Callable[[int], str | None] = lambda _task: None) -> dict[str, int]:
    """Tasks by the state of their latest attempt as the store has it: the last tick's view, no sacct.
    A task without one is NOT_SUBMITTED, or what `unstarted` calls it (NOT_PROMOTED, NOT_ASKED)."""
    latest = {a.task_index: a.state for a in attempts}
    return dict(Counter(latest[t] if t in latest else unstarted(t) or NOT_SUBMITTED for t in tasks).most_common())


def count_states(rows: Iterable[TaskRow], more: Mapping[str, int] | None = None) -> dict[str, int]:
    """{state: tasks}, most first; `more`: tasks counted without a row (a screen reads a page of them)."""
    counts = Counter(row.state for row in rows)
    counts.update({state: n for state, n in (more or {}).items() if n})
    return dict(counts.most_common())


BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[float], full: float = 100.0, width: int = 20) -> str:
    """`[0, 50, 100]` → `▁▄█`: the last `width` values, scaled to `full`."""
    tail = list(values)[-width:]
    return "".join(BARS[min(len(BARS) - 1, max(0, round(v / full * (len(BARS) - 1))))] for v in tail)


def with_clusters(rows: Sequence[TaskRow], default: str) -> list[TaskRow]:
    """The rows of a campaign with `clusters:`, each naming the cluster of its latest attempt (a
    plain job id is on `default`, the cluster SLURM_CONF names: core/slurm/job_ref.py)."""
    return [replace(r, cluster=job_ref.cluster_of(r.job_id) or default) if r.job_id else r for r in rows]
