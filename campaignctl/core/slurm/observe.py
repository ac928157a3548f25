"""Join what the store remembers about attempts with this tick's sacct/squeue view: which
attempts need observing, what changed, and the per-task views `decide` reads. Pure."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Collection, Iterable, Mapping

from campaignctl.core.base.clock import read_time
from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.model.params import Scalar
from campaignctl.core.model.records import AttemptFacts, HistoryRow, ObservedChange
from campaignctl.core.model.slurm_states import State
from campaignctl.core.slurm.sacct_records import JobObservation
from campaignctl.core.spec.spec import Resources

UNKNOWN = "UNKNOWN"
ABANDONED = "ABANDONED"  # a submission given up before any job of it ran
FINAL = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
                    "PREEMPTED", "CANCELLED", "DEADLINE"})
_STORED_FACTS = operator.attrgetter(*AttemptFacts._fields)  # a row's facts as a plain tuple, in C: per attempt
_STATE_TEXT = {s: s.value for s in State}  # `.value` is a descriptor call: slow a hundred thousand times
# AttemptFacts by position, named from its fields (slices are what a 100,000-attempt tick can afford):
# the facts rules read, the running clock (elapsed, RSS), and the moments (ended_at, missing_since)
_RULE_FACTS = slice(0, AttemptFacts._fields.index("elapsed_s"))
_CLOCK = slice(_RULE_FACTS.stop, AttemptFacts._fields.index("ended_at"))
_MOMENTS = slice(_CLOCK.stop, None)
_BEFORE_MISSING = slice(0, AttemptFacts._fields.index("missing_since"))
_AFTER_STATE = slice(1, _BEFORE_MISSING.stop)

Key = tuple[str, int | None]


def needs_observing(row: HistoryRow, decided: Collection[str]) -> bool:
    """A job id we have not seen settle: not COMPLETED, and not a failure already answered."""
    if row.job_id is None:
        return False
    return not (row.state == "COMPLETED" or (row.state in FINAL and row.token in decided))


def key_of(row: HistoryRow) -> Key:
    return (row.job_id or "").partition("_")[0], row.array_index


def diff_observations(rows: Iterable[HistoryRow], observed: Mapping[Key, JobObservation],
                      queued_arrays: Callable[[], Collection[str]], now: str,
                      cancelled_pending: Callable[[], Collection[str]] = frozenset,
                      packed: Mapping[str, JobObservation] | None = None) -> list[ObservedChange]:
    """What to write back. An attempt missing from sacct is UNKNOWN, never done: if squeue still
    lists its array (sacct lags squeue) nothing changes; otherwise `missing_since` starts. Except
    an element this campaign cancelled while it was pending (`cancelled_pending`: attempt tokens):
    Slurm 24.11 keeps no record of it at all (`scancel --state=PENDING 30_0`, then 30_1: sacct
    lists only `30_[1]`; 22.05 lists `30_[0-1]` CANCELLED), so its absence is that cancel.
    `packed`: by attempt token, a packed task's own observation (core/packing/pack_fates.py), read in
    place of its element's."""
    changes = []
    for row in rows:
        old: tuple[object, ...] = _STORED_FACTS(row)  # compares equal to the AttemptFacts of the same values
        key = ((row.job_id or "").partition("_")[0], row.array_index)  # key_of(row), without the call
        obs = observed.get(key) if packed is None else packed.get(row.token) or observed.get(key)
        if obs is not None:
            new = AttemptFacts(_STATE_TEXT[obs.state], obs.slurm_state, obs.exit_code, obs.nodes, obs.elapsed_s,
                               obs.max_rss, obs.end, None)
        elif key[0] in queued_arrays():
            if row.missing_since is None:
                continue  # sacct lags squeue: nothing new
            new = AttemptFacts._make((*old[_BEFORE_MISSING], None))
        elif row.token in cancelled_pending():
            new = AttemptFacts("CANCELLED", "CANCELLED", None, "", None, "", now, None)
        else:
            new = AttemptFacts._make((UNKNOWN, *old[_AFTER_STATE], row.missing_since or now))
        if new == old:
            continue
        # history for replay keeps every fact a rule reads, but not the running clock
        fresh: tuple[object, ...] = new
        for_history = fresh[_RULE_FACTS] != old[_RULE_FACTS]
        if not for_history:  # the usual change, state, needs no look at the times
            same_times = _same_times(fresh[_MOMENTS], old[_MOMENTS])
            if same_times and fresh[_CLOCK] == old[_CLOCK]:
                continue
            for_history = not same_times
        changes.append(ObservedChange(row.id, new, for_history, obs.alloc_tres if obs is not None else "",
                                      obs.consumed_energy_j if obs is not None else None))
    return changes


def _same_times(new: tuple[object, ...], old: tuple[object, ...]) -> bool:
    """The same moments: a row stored before times were UTC holds naive local text for what
    sacct now prints in UTC (core/base/clock.py); that alone is no change."""
    if new == old:
        return True
    for a, b in zip(new, old, strict=True):
        if a != b and not (isinstance(a, str) and isinstance(b, str) and read_time(a) == read_time(b)):
            return False
    return True


def task_views(rows: Iterable[HistoryRow], decided: Collection[str],
               changes: Iterable[ObservedChange] = (),
               causes: Mapping[int, tuple[str, str]] | None = None) -> list[TaskView]:
    """Rows (ordered by task, attempt), with this tick's `changes` and output `causes` (by
    attempt id) laid over them, → one TaskView per task that can still matter to a decision: a
    task whose only attempt COMPLETED cannot (no failure to answer, no node to blame, nothing
    pending or running), so it has none."""
    parse = resources_parser()
    parse_params = params_parser()
    causes = causes or {}
    changed = {c.attempt_id: c.facts for c in changes}
    grouped: dict[int, list[AttemptView]] = {}
    for r in rows:
        f: AttemptFacts | HistoryRow = changed.get(r.id, r)  # a row carries the facts' fields itself
        if r.attempt_number == 1 and f.state == "COMPLETED":
            continue  # a completed first attempt is its task's only one
        cause, evidence = causes.get(r.id, (r.cause, r.evidence))
        grouped.setdefault(r.task_index, []).append(AttemptView(
            r.token, r.attempt_number, f.state, r.job_id, parse(r.resources_json), f.exit_code,
            f.slurm_state, f.nodes, f.elapsed_s, f.max_rss, f.ended_at, f.missing_since,
            r.token in decided, cause, evidence, parse_params(r.params_json), r.params_changed, r.packed))
    return [TaskView(index, tuple(attempts)) for index, attempts in grouped.items()]


def params_parser() -> Callable[[str], Mapping[str, Scalar]]:
    cache: dict[str, Mapping[str, Scalar]] = {}

    def parse(text: str) -> Mapping[str, Scalar]:
        if text not in cache:
            cache[text] = json.loads(text or "{}")
        return cache[text]

    return parse


def resources_parser() -> Callable[[str], Resources]:
    """Attempts of one array share one JSON text: parse each distinct text once."""
    cache: dict[str, Resources] = {}

    def parse(text: str) -> Resources:
        if text not in cache:
            cache[text] = Resources(**json.loads(text))
        return cache[text]

    return parse


def is_settled(view: TaskView) -> bool:
    """Finished for good: completed, or its last failure answered by giving up. A lost attempt
    stays UNKNOWN in the store; once answered (given up as `lost`) it is settled too, and so is
    an attempt whose submission Slurm kept refusing (ABANDONED, given up as `submit_refused`)."""
    latest = view.latest
    return latest.state == "COMPLETED" or (latest.state in FINAL | {UNKNOWN, ABANDONED} and latest.decided)
