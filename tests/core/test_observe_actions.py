"""The reconcile core around decide(): which attempts to ask sacct about, what changed since the
last tick, the per-task views, and how decisions become Slurm actions (one sbatch per resource
set and chunk, one `scontrol update` per array, give-ups on their own)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Collection
from dataclasses import asdict, replace
from datetime import datetime, timedelta

import pytest

from campaignctl.core.decisions.action_records import Cancel, ResizePending, Stop, record_of
from campaignctl.core.decisions.actions import ActionPlan, ResizeGroup, plan_actions
from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.model.records import AttemptFacts, HistoryRow, ObservedChange
from campaignctl.core.model.slurm_states import State
from campaignctl.core.slurm.observe import (
    diff_observations,
    is_settled,
    needs_observing,
    task_views,
)
from campaignctl.core.slurm.plan import ArrayChunk
from campaignctl.core.slurm.sacct_records import JobObservation
from campaignctl.core.spec.spec import Resources

NOW = datetime(2026, 11, 21, 12, 0)

Key = tuple[str, int | None]


def apply_changes(rows: list[HistoryRow], changes: list[ObservedChange]) -> list[HistoryRow]:
    """What the store holds after `record_observations(changes)`."""
    by_id = {c.attempt_id: c for c in changes}
    fields = ("state", "slurm_state", "exit_code", "nodes", "elapsed_s", "max_rss", "ended_at", "missing_since")
    return [replace(r, **{f: getattr(by_id[r.id].facts, f) for f in fields}) if r.id in by_id else r for r in rows]


def at(minutes: float) -> str:
    return (NOW + timedelta(minutes=minutes)).isoformat()


def row(state: str, *, id: int = 1, task: int = 0, number: int = 1, array: str | None = "12", index: int = 0,
        token: str | None = None, exit_code: int | None = 0, nodes: str = "node1", elapsed_s: int | None = 5,
        ended_at: str | None = None, missing_since: str | None = None, mem: int = 1000) -> HistoryRow:
    return HistoryRow(
        id=id, task_index=task, attempt_number=number, array_index=index, token=token or f"sub{array}.{index}",
        job_id=f"{array}_{index}" if array else None, state=state, slurm_state=state, exit_code=exit_code,
        nodes=nodes, elapsed_s=elapsed_s, max_rss="", ended_at=ended_at, missing_since=missing_since,
        resources_json=json.dumps(asdict(Resources(mem_mb=mem))), submission_token=f"sub{array}",
        submission_state="released", created_at=at(-60))


def obs(state: State, *, key: Key = ("12", 0), slurm_state: str | None = None,
        exit_code: int | None = 0, nodes: str = "node1", elapsed_s: int | None = 5,
        end: str | None = None) -> JobObservation:
    return JobObservation(key=key, state=state, slurm_state=slurm_state or state.value, cancelled_by=None,
                          exit_code=exit_code, exit_signal=0, elapsed_s=elapsed_s, nodes=nodes, start=at(-10),
                          end=end)


def queued(*arrays: str) -> Callable[[], Collection[str]]:
    return lambda: set(arrays)


def never_asked() -> Collection[str]:
    raise AssertionError("squeue asked although sacct answered for every attempt")


# --- which attempts sacct is asked about ----------------------------------------------------------

@pytest.mark.parametrize(("history", "decided", "observe"), [
    pytest.param(row("SUBMITTING", array=None), set(), False, id="no job id yet"),
    pytest.param(row("SUBMITTING"), set(), True, id="submitted, not seen yet"),
    pytest.param(row("PENDING"), set(), True, id="pending"),
    pytest.param(row("RUNNING"), set(), True, id="running"),
    pytest.param(row("RUNNING"), {"sub12.0"}, True, id="running, resized (not a final answer)"),
    pytest.param(row("COMPLETED"), set(), False, id="completed"),
    pytest.param(row("FAILED"), set(), True, id="failed, not answered"),
    pytest.param(row("FAILED"), {"sub12.0"}, False, id="failed, answered"),
    pytest.param(row("OUT_OF_MEMORY"), {"other.0"}, True, id="another attempt answered"),
    pytest.param(row("CANCELLED"), {"sub12.0"}, False, id="cancelled, given up"),
    pytest.param(row("UNKNOWN", missing_since=at(-1)), set(), True, id="unknown"),
])
def test_needs_observing(history: HistoryRow, decided: set[str], observe: bool) -> None:
    assert needs_observing(history, decided) is observe


# --- what changed this tick ------------------------------------------------------------------------

def test_finished_attempt_takes_every_observed_fact() -> None:
    changes = diff_observations([row("RUNNING", id=7, elapsed_s=5)],
                                {("12", 0): obs(State.OUT_OF_MEMORY, exit_code=0, nodes="node3", elapsed_s=90,
                                                end=at(-1))},
                                never_asked, at(0))
    assert changes == [ObservedChange(attempt_id=7, facts=AttemptFacts(
        state="OUT_OF_MEMORY", slurm_state="OUT_OF_MEMORY", exit_code=0, nodes="node3", elapsed_s=90, max_rss="",
        ended_at=at(-1), missing_since=None), for_history=True)]


# before, sacct's answer (None: absent), arrays in squeue, expected (state, missing_since, for_history) or None
@pytest.mark.parametrize(("before", "seen", "in_squeue", "after"), [
    pytest.param(row("RUNNING"), obs(State.RUNNING), (), None, id="nothing new"),
    pytest.param(row("RUNNING", elapsed_s=5), obs(State.RUNNING, elapsed_s=65), (),
                 ("RUNNING", None, False), id="elapsed grew, same state"),
    pytest.param(row("PENDING"), obs(State.RUNNING), (), ("RUNNING", None, True), id="started"),
    pytest.param(row("RUNNING"), obs(State.CANCELLED, slurm_state="CANCELLED by 1234"), (),
                 ("CANCELLED", None, True), id="cancelled"),
    pytest.param(row("PENDING"), None, ("12",), None, id="sacct lags squeue: nothing changes"),
    pytest.param(row("SUBMITTING"), None, ("12", "13"), None, id="just submitted, only in squeue"),
    pytest.param(row("RUNNING"), None, (), ("UNKNOWN", at(0), True), id="absent from both: missing from now"),
    pytest.param(row("RUNNING"), None, ("13",), ("UNKNOWN", at(0), True), id="only another array queued"),
    pytest.param(row("UNKNOWN", missing_since=at(-5)), None, (), None, id="still missing: first time kept"),
    pytest.param(row("UNKNOWN", missing_since=at(-5)), obs(State.RUNNING), (), ("RUNNING", None, True),
                 id="seen again: missing_since cleared"),
])
def test_diff_observations(before: HistoryRow, seen: JobObservation | None, in_squeue: tuple[str, ...],
                           after: tuple[str, str | None, bool] | None) -> None:
    observed: dict[Key, JobObservation] = {} if seen is None else {("12", 0): seen}
    changes = diff_observations([before], observed, queued(*in_squeue), at(0))
    if after is None:
        assert changes == []
    else:
        assert [(c.attempt_id, c.facts.state, c.facts.missing_since, c.for_history) for c in changes] == [(1, *after)]


def test_missing_attempt_keeps_what_was_last_seen() -> None:
    before = row("RUNNING", exit_code=None, nodes="node4", elapsed_s=300)
    [change] = diff_observations([before], {}, queued(), at(0))
    f = change.facts
    assert (f.slurm_state, f.nodes, f.elapsed_s, f.exit_code) == ("RUNNING", "node4", 300, None)


def test_a_pending_element_we_cancelled_and_slurm_forgot_is_cancelled() -> None:
    # Slurm 24.11: `scancel --state=PENDING 30_0` leaves no accounting record of 30_0 (sacct lists
    # only `30_[1]`, tests/integration/test_fallback_real.py); our own applied cancel explains it
    pending = row("PENDING", exit_code=None, nodes="", elapsed_s=0)
    [change] = diff_observations([pending], {}, queued(), at(0), lambda: {pending.token})
    assert (change.facts.state, change.facts.missing_since, change.facts.ended_at) == ("CANCELLED", None, at(0))
    # anyone else's element, or one squeue still lists, is not concluded from its absence
    [other] = diff_observations([pending], {}, queued(), at(0), lambda: {"another.0"})
    assert other.facts.state == "UNKNOWN"
    assert diff_observations([pending], {}, queued("12"), at(0), lambda: {pending.token}) == []


def test_missing_since_is_the_first_tick_across_ticks() -> None:
    rows = [row("RUNNING")]
    for minute in (0, 1, 2):
        rows = apply_changes(rows, diff_observations(rows, {}, queued(), at(minute)))
    assert (rows[0].state, rows[0].missing_since) == ("UNKNOWN", at(0))


def test_observations_are_matched_by_array_and_index() -> None:
    rows = [row("RUNNING", id=1, array="12", index=0), row("RUNNING", id=2, array="12", index=1),
            row("RUNNING", id=3, array="13", index=0)]
    observed: dict[Key, JobObservation] = {("12", 1): obs(State.COMPLETED, key=("12", 1)),
                                           ("13", 0): obs(State.FAILED, key=("13", 0))}
    changes = diff_observations(rows, observed, queued("12"), at(0))
    assert [(c.attempt_id, c.facts.state) for c in changes] == [(2, "COMPLETED"), (3, "FAILED")]


def test_apply_changes_touches_only_changed_rows() -> None:
    rows = [row("RUNNING", id=1), row("RUNNING", id=2, index=1)]
    changes = diff_observations(rows[:1], {("12", 0): obs(State.COMPLETED, end=at(-1))}, never_asked, at(0))
    after = apply_changes(rows, changes)
    assert (after[0].state, after[0].ended_at) == ("COMPLETED", at(-1))
    assert after[1] == rows[1]


# --- per-task views ----------------------------------------------------------------------------------

def test_task_views_group_attempts_and_mark_answered_ones() -> None:
    rows = [row("OUT_OF_MEMORY", id=1, task=0, number=1, array="12", index=0),
            row("RUNNING", id=2, task=0, number=2, array="20", index=0, mem=1500),
            row("COMPLETED", id=3, task=1, number=1, array="12", index=1)]
    views = task_views(rows, {"sub12.0"})
    # task 1 completed at its first attempt: nothing about it can matter to a decision, no view
    assert [(v.index, [(a.number, a.state, a.decided) for a in v.attempts]) for v in views] == [
        (0, [(1, "OUT_OF_MEMORY", True), (2, "RUNNING", False)])]
    assert views[0].latest.resources == Resources(mem_mb=1500)
    assert views[0].latest.job_id == "20_0" and views[0].latest.array_job_id == "20"


def attempt_view(state: str, decided: bool = False) -> AttemptView:
    return AttemptView("s.0", 1, state, "12_0", Resources(), decided=decided)


@pytest.mark.parametrize(("states", "settled"), [
    pytest.param([("COMPLETED", False)], True, id="completed"),
    pytest.param([("FAILED", True)], True, id="failure given up"),
    pytest.param([("FAILED", False)], False, id="failure not answered yet"),
    pytest.param([("OUT_OF_MEMORY", True), ("RUNNING", False)], False, id="retry running"),
    pytest.param([("OUT_OF_MEMORY", True), ("COMPLETED", False)], True, id="retry completed"),
    pytest.param([("PENDING", False)], False, id="pending"),
    pytest.param([("UNKNOWN", False)], False, id="missing, not yet lost"),
    pytest.param([("UNKNOWN", True)], True, id="lost and given up"),
])
def test_is_settled(states: list[tuple[str, bool]], settled: bool) -> None:
    view = TaskView(0, tuple(attempt_view(s, d) for s, d in states))
    assert is_settled(view) is settled


# --- decisions → actions --------------------------------------------------------------------------------

def decision(task: int, action: str = "resubmit", mem: int | None = 1500, *, array: str = "12",
             index: int | None = None) -> Decision:
    resources = None if mem is None else Resources(mem_mb=mem)
    token = f"sub{array}.{task if index is None else index}"
    params = {"changes": {"mem_mb": [1000, mem]}} if action == "resize_pending" else {}
    return Decision(task, token, "out_of_memory", action, f"{action} task {task}", {"job_id": f"{array}_{task}"},
                    record_of(action, params), resources)


def array_of(token: str) -> str | None:
    """`sub12.3` → array job 12 (what reconcile knows from the attempts' job ids)."""
    return token.split(".")[0].removeprefix("sub") or None


def plan(decisions: list[Decision], max_array_size: int = 1001, max_parallel: int | None = None) -> ActionPlan:
    counter = itertools.count(1)
    return plan_actions(decisions, array_of, max_array_size, max_parallel, lambda: f"g{next(counter)}")


def test_resubmits_with_equal_resources_go_out_as_one_array() -> None:
    decisions = [decision(5), decision(2), decision(9)]
    result = plan(decisions, max_parallel=2)
    [group] = result.resubmits
    assert group.token == "g1" and group.resources == Resources(mem_mb=1500)
    assert group.chunk == ArrayChunk(task_indices=(2, 5, 9), throttle=2)
    assert group.chunk.array_spec == "0-2%2"
    assert [d.task_index for d in group.decisions] == [2, 5, 9]  # array index i runs decisions[i]
    assert result.resizes == () and result.recorded == ()


@pytest.mark.parametrize(("tasks", "max_array_size", "chunks"), [
    ([0, 1, 2, 3, 4], 2, [(0, 1), (2, 3), (4,)]),
    ([0, 1, 2, 3], 4, [(0, 1, 2, 3)]),
    ([7], 1, [(7,)]),
    ([3, 1, 2], 1, [(1,), (2,), (3,)]),
])
def test_resubmits_are_chunked_by_max_array_size(tasks: list[int], max_array_size: int,
                                                 chunks: list[tuple[int, ...]]) -> None:
    result = plan([decision(t) for t in tasks], max_array_size)
    assert [g.chunk.task_indices for g in result.resubmits] == chunks
    assert [g.token for g in result.resubmits] == [f"g{i}" for i in range(1, len(chunks) + 1)]
    assert all(g.chunk.size <= max_array_size for g in result.resubmits)


def test_distinct_resources_go_out_as_separate_arrays() -> None:
    result = plan([decision(0, mem=1500), decision(1, mem=3000), decision(2, mem=1500)])
    assert [(g.resources.mem_mb, g.chunk.task_indices) for g in result.resubmits] == [(1500, (0, 2)), (3000, (1,))]
    assert len({g.token for g in result.resubmits}) == 2


def test_resizes_are_one_update_per_array() -> None:
    result = plan([decision(5, "resize_pending", array="12"), decision(3, "resize_pending", array="12"),
                   decision(0, "resize_pending", array="13")])
    assert [(g.array_job_id, g.job_expression) for g in result.resizes] == [("12", "12_[3,5]"), ("13", "13_[0]")]
    # only what changed: a plain user may not raise TimeLimit, so a memory resize must not send it
    assert result.resizes[0].scontrol_fields() == ["MinMemoryNode=1500"]
    assert result.resubmits == () and result.recorded == ()


def test_a_cpu_resize_sets_numcpus_and_cpus_per_task_together() -> None:
    """NumCPUs alone allocates 2 CPUs but leaves SLURM_CPUS_PER_TASK=1; CPUsPerTask alone still
    allocates 1 (both seen on the lab cluster)."""
    grown = Decision(3, "sub12.3", "data_starved", "resize_pending", "more cpus", {"job_id": "12_3"},
                     ResizePending(changes={"cpus_per_task": (1, 2)}), Resources(cpus_per_task=2, mem_mb=1000))
    [group] = plan([grown]).resizes
    assert group.scontrol_fields() == ["NumCPUs=2", "CPUsPerTask=2"]


def test_resizes_to_different_resources_in_one_array_are_separate_updates() -> None:
    result = plan([decision(1, "resize_pending", mem=1500), decision(2, "resize_pending", mem=2000)])
    assert [(g.job_expression, g.resources.mem_mb) for g in result.resizes] == [("12_[1]", 1500), ("12_[2]", 2000)]


@pytest.mark.parametrize(("tokens", "expression"), [
    (["abc.3", "abc.5"], "12_[3,5]"),
    (["abc.10", "abc.2"], "12_[2,10]"),  # numeric order, not text order
    (["a.b.c.7"], "12_[7]"),  # the index is the part after the last dot
])
def test_job_expression_is_built_from_the_token_suffix(tokens: list[str], expression: str) -> None:
    decisions = tuple(replace(decision(i, "resize_pending"), attempt_token=t) for i, t in enumerate(tokens))
    assert ResizeGroup("g1", "12", Resources(), decisions).job_expression == expression


def test_give_ups_are_recorded_only_and_planned_pairs_every_decision_with_its_group() -> None:
    decisions = [decision(0), decision(1, "give_up", mem=None), decision(2, "resize_pending", array="12"),
                 decision(3, mem=3000), decision(4, "give_up", mem=None)]
    result = plan(decisions)
    assert [d.task_index for d in result.recorded] == [1, 4]
    assert [(d.task_index, token) for d, token in result.planned()] == [
        (0, "g1"), (3, "g2"), (2, "g3"), (1, ""), (4, "")]
    assert sorted(id(d) for d, _ in result.planned()) == sorted(id(d) for d in decisions)


def test_a_stop_is_a_single_state_filtered_cancel_like_a_move() -> None:
    stop = Decision(3, "sub12.3", "early_stopping", "stop", "trails", {"job_id": "12_3"}, Stop(only_if="RUNNING"))
    move = replace(stop, rule="gpu_fallback", action="cancel", typed=Cancel(only_if="PENDING"))
    result = plan([stop, move])
    assert [(g.token, g.decision.action) for g in result.cancels] == [("g1", "stop"), ("g2", "cancel")]
    assert result.recorded == () and result.resubmits == ()


def test_nothing_to_do_is_an_empty_plan() -> None:
    result = plan([])
    assert result == ActionPlan((), (), ()) and result.planned() == []


def test_a_resize_that_lets_every_node_back_clears_the_exclude_list_with_a_blank_value() -> None:
    """scontrol(1): "Value may be cleared with blank data value" (both lab Slurms: ExcNodeList=(null))."""
    new = Resources()
    d = Decision(0, "12.0", "node_fail", "resize_pending", "pending; exclude node3 → None", {},
                 ResizePending(changes={"exclude": ("node3", None)}, array_job_id="12", resources=new), new)
    assert ResizeGroup("12.0", "12", new, (d,)).scontrol_fields() == ["ExcNodeList="]
