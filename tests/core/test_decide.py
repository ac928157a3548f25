"""decide(): one table row per situation a campaign meets, asserting what a user reads in
`campaignctl log` (action, rule, reason) and what the next attempt gets (resources)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from campaignctl.core.decisions.decision import AttemptView, Decision, TaskView
from campaignctl.core.policy.policy import Policy, Rule
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.decide import (
    campaign_excluded_nodes,
    count_node_failures,
    decide,
    decide_task,
    resize_pending_siblings,
    split_nodes,
)
from campaignctl.core.tick.siblings import CAMPAIGN, Ends, NodeShape, SiblingFacts, parse_node_shapes, tally_first_ends

NOW = datetime(2026, 11, 21, 12, 0)

# The design's default policy ("Causes and default policy"), spelled out so these rows read alone.
POLICY = Policy(
    name="test", version=1, max_failures=6, unknown_grace_s=600, campaign_exclude_after=2,
    rules={
        "out_of_memory": Rule("resubmit", max_retries=3, mem_factor=1.5, mem_cap_mb=65536, resize_pending=True),
        "timeout": Rule("resubmit", max_retries=3, time_factor=1.5, time_cap_min=2880, resize_pending=True),
        "node_fail": Rule("resubmit", max_retries=5, exclude_failed_node=True),
        "boot_fail": Rule("resubmit", max_retries=5, exclude_failed_node=True),
        "preempted": Rule("resubmit", max_retries=10, counts_as_failure=False),
        "failed": Rule("resubmit", max_retries=2, retry_exit_codes=(75,), backoff_s=60, backoff_factor=2),
        "cancelled": Rule("give_up"),
        "deadline": Rule("give_up"),
        "lost": Rule("resubmit", max_retries=1),
    })


def with_rule(cause: str, **changes: object) -> Policy:
    return replace(POLICY, rules={**POLICY.rules, cause: replace(POLICY.rules[cause], **changes)})  # type: ignore[arg-type]


def at(minutes: float) -> str:
    """A timestamp `minutes` after NOW (negative: before), as the store keeps it."""
    return (NOW + timedelta(minutes=minutes)).isoformat()


def attempt(state: str, number: int = 1, mem: int = 1000, time: int = 60, *, exclude: str | None = None,
            exit_code: int | None = None, slurm_state: str | None = None, nodes: str = "node1",
            ended_at: str | None = None, missing_since: str | None = None, decided: bool = False,
            array: str = "12", index: int = 0, token: str | None = None) -> AttemptView:
    return AttemptView(
        token=token or f"sub{array}.{index}", number=number, state=state, job_id=f"{array}_{index}",
        resources=Resources(mem_mb=mem, time_min=time, exclude=exclude), exit_code=exit_code,
        slurm_state=slurm_state or state, nodes=nodes, ended_at=ended_at, missing_since=missing_since,
        decided=decided)


def history(*states: str, index: int = 0, **latest: object) -> TaskView:
    """A task whose attempts ended in `states`, oldest first; every attempt but the latest is
    already answered (an earlier UNKNOWN one as lost: missing for hours); `latest` sets fields of
    the last attempt."""
    attempts = [attempt(s, n, decided=True, array=f"{n}0", index=index,
                        missing_since=at(-180) if s == "UNKNOWN" else None)
                for n, s in enumerate(states[:-1], 1)]
    attempts.append(attempt(states[-1], len(states), array=f"{len(states)}0", index=index, **latest))  # type: ignore[arg-type]
    return TaskView(index, tuple(attempts))


def one(view: TaskView, policy: Policy = POLICY, now: datetime = NOW) -> Decision | None:
    return decide_task(view, policy, now)


# --- one task, one decision ---------------------------------------------------------------------
# view, action, rule, (mem_mb, time_min, exclude) of the next attempt, reason fragment
DECISIONS = [
    pytest.param(history("OUT_OF_MEMORY"), "resubmit", "out_of_memory", (1500, 60, None),
                 "out of memory (attempt 1); retry 1 of 3 with mem_mb 1000 → 1500.", id="oom: mem x1.5"),
    pytest.param(history("OUT_OF_MEMORY", mem=1001), "resubmit", "out_of_memory", (1502, 60, None),
                 "mem_mb 1001 → 1502", id="oom: rounded up"),
    pytest.param(history("OUT_OF_MEMORY", mem=3000), "resubmit", "out_of_memory", (4500, 60, None),
                 "mem_mb 3000 → 4500", id="oom: exact product stays exact"),
    pytest.param(history("OUT_OF_MEMORY", mem=50_000), "resubmit", "out_of_memory", (65536, 60, None),
                 "mem_mb 50000 → 65536", id="oom: capped at mem_cap"),
    pytest.param(history("OUT_OF_MEMORY", mem=65536), "give_up", "out_of_memory", None,
                 "out of memory (attempt 1) at 65536 MB, already at the cap of 65536 MB.", id="oom: at cap"),
    pytest.param(history("OUT_OF_MEMORY", "OUT_OF_MEMORY", "OUT_OF_MEMORY"), "resubmit", "out_of_memory",
                 (1500, 60, None), "retry 3 of 3", id="oom: third"),
    pytest.param(history("OUT_OF_MEMORY", "OUT_OF_MEMORY", "OUT_OF_MEMORY", "OUT_OF_MEMORY"), "give_up",
                 "out_of_memory", None,
                 "out of memory (attempt 4): out_of_memory seen 4 times, above the cap of 3 retries.",
                 id="oom: fourth gives up"),
    pytest.param(history("TIMEOUT"), "resubmit", "timeout", (1000, 90, None),
                 "timeout (attempt 1); retry 1 of 3 with time_min 60 → 90; the retry resumes if "
                 "its checkpoint is there (CAMPAIGNCTL_RESUME=1, the same checkpoint directory).",
                 id="timeout: time x1.5, resume"),
    pytest.param(history("TIMEOUT", time=2000), "resubmit", "timeout", (1000, 2880, None),
                 "time_min 2000 → 2880", id="timeout: capped"),
    pytest.param(history("TIMEOUT", time=2880), "give_up", "timeout", None,
                 "timeout (attempt 1) at 2880 min, already at the cap of 2880 min.", id="timeout: at cap"),
    pytest.param(history("NODE_FAIL", nodes="node3"), "resubmit", "node_fail", (1000, 60, "node3"),
                 "node fail (attempt 1); retry 1 of 5 with exclude None → node3.", id="node fail: exclude it"),
    pytest.param(history("NODE_FAIL", nodes="node[1-2]"), "resubmit", "node_fail", (1000, 60, "node1,node2"),
                 "exclude None → node1,node2", id="node fail: hostlist expands"),
    pytest.param(history("NODE_FAIL", nodes="node1", exclude="node[3-4]"), "resubmit", "node_fail",
                 (1000, 60, "node1,node3,node4"), "exclude node[3-4] → node1,node3,node4",
                 id="node fail: spec exclude kept"),
    pytest.param(history("BOOT_FAIL", nodes="gpu07"), "resubmit", "boot_fail", (1000, 60, "gpu07"),
                 "boot fail (attempt 1); retry 1 of 5", id="boot fail: exclude it"),
    pytest.param(history(*["NODE_FAIL"] * 6), "give_up", "node_fail", None,
                 "node_fail seen 6 times, above the cap of 5 retries.", id="node fail: sixth gives up"),
    pytest.param(history(*["PREEMPTED"] * 8), "resubmit", "preempted", (1000, 60, None),
                 "preempted (attempt 8); retry 8 of 10 with unchanged resources.",
                 id="preempted: 8 resubmit although max_failures is 6"),
    pytest.param(history(*["PREEMPTED"] * 11), "give_up", "preempted", None,
                 "preempted seen 11 times, above the cap of 10 retries.", id="preempted: own cap"),
    pytest.param(history(*["PREEMPTED"] * 8, "OUT_OF_MEMORY", "OUT_OF_MEMORY", "TIMEOUT", "TIMEOUT", "NODE_FAIL",
                         "NODE_FAIL"),
                 "resubmit", "node_fail", (1000, 60, "node1"), "node fail (attempt 14); retry 2 of 5",
                 id="budget: 6 failures and 8 preemptions still resubmit"),
    pytest.param(history("OUT_OF_MEMORY", "OUT_OF_MEMORY", "OUT_OF_MEMORY", "TIMEOUT", "TIMEOUT", "NODE_FAIL",
                         "NODE_FAIL"),
                 "give_up", "node_fail", None,
                 "node fail (attempt 7): 7 failures use up the task's failure budget of 6.",
                 id="budget: seventh counting failure gives up"),
    pytest.param(history("FAILED", exit_code=75), "resubmit", "failed", (1000, 60, None),
                 "failed (attempt 1); retry 1 of 2 with unchanged resources.", id="failed: retryable code"),
    pytest.param(history("FAILED", "FAILED", "FAILED", exit_code=75), "give_up", "failed", None,
                 "failed seen 3 times, above the cap of 2 retries.", id="failed: retryable, cap"),
    pytest.param(history("FAILED", exit_code=1), "give_up", "failed", None,
                 "exit code 1 is not in retry_exit_codes [75]: treated as a bug in the program, not retried.",
                 id="failed: other code is a bug"),
    pytest.param(history("CANCELLED", slurm_state="CANCELLED by 1234"), "give_up", "cancelled", None,
                 "cancelled (attempt 1) by uid 1234: the policy's cancelled rule says give up, so the task "
                 "stops here.", id="cancelled: names the uid"),
    pytest.param(history("CANCELLED"), "give_up", "cancelled", None,
                 "cancelled (attempt 1): the policy's cancelled rule says give up", id="cancelled: no uid"),
    pytest.param(history("DEADLINE"), "give_up", "deadline", None,
                 "deadline (attempt 1): the policy's deadline rule says give up", id="deadline"),
    pytest.param(history("UNKNOWN", missing_since=at(-10)), "resubmit", "lost", (1000, 60, None),
                 "retry 1 of 1 with unchanged resources.", id="lost: grace over"),
    pytest.param(history("UNKNOWN", "UNKNOWN", missing_since=at(-10)), "give_up", "lost", None,
                 "lost seen 2 times, above the cap of 1 retries.", id="lost: second loss gives up"),
]


@pytest.mark.parametrize(("view", "action", "rule", "resources", "reason"), DECISIONS)
def test_decision(view: TaskView, action: str, rule: str, resources: tuple[int, int, str | None] | None,
                  reason: str) -> None:
    decision = one(view)
    assert decision is not None
    assert (decision.task_index, decision.attempt_token, decision.action, decision.rule) == \
        (view.index, view.latest.token, action, rule)
    assert reason in decision.reason
    if resources is None:
        assert decision.resources is None
    else:
        assert decision.resources is not None
        r = decision.resources
        assert (r.mem_mb, r.time_min, r.exclude) == resources


NO_DECISION = [
    pytest.param(history("COMPLETED"), id="completed"),
    pytest.param(history("RUNNING"), id="running"),
    pytest.param(history("PENDING"), id="pending"),
    pytest.param(history("SUBMITTING"), id="submitting"),
    pytest.param(history("SUSPENDED"), id="suspended"),
    pytest.param(history("UNKNOWN"), id="unknown, never missing"),
    pytest.param(history("UNKNOWN", missing_since=at(-9)), id="unknown within grace"),
    pytest.param(history("OUT_OF_MEMORY", decided=True), id="already decided"),
    pytest.param(history("CANCELLED", decided=True), id="give-up already decided"),
    pytest.param(history("UNKNOWN", missing_since=at(-60), decided=True), id="lost already decided"),
    pytest.param(history("OUT_OF_MEMORY", "RUNNING"), id="earlier failure, retry running"),
]


@pytest.mark.parametrize("view", NO_DECISION)
def test_no_decision(view: TaskView) -> None:
    assert one(view) is None


@pytest.mark.parametrize(("missing_minutes", "grace_s", "decided"), [
    (9.99, 600, False), (10, 600, True), (10, 1800, False), (30, 1800, True), (0, 0, True),
])
def test_lost_after_grace(missing_minutes: float, grace_s: int, decided: bool) -> None:
    view = history("UNKNOWN", missing_since=at(-missing_minutes))
    decision = one(view, replace(POLICY, unknown_grace_s=grace_s))
    assert (decision is not None) == decided
    if decision is not None:
        assert decision.rule == "lost"


def test_lost_follows_the_policy_lost_rule() -> None:
    decision = one(history("UNKNOWN", missing_since=at(-10)), with_rule("lost", action="give_up"))
    assert decision is not None and decision.action == "give_up"
    assert "the policy's lost rule says give up" in decision.reason


# --- backoff: a retryable exit code waits ended_at + backoff × factor^(occurrence-1) -------------
# earlier FAILED attempts, minutes since the latest ended, decision expected
@pytest.mark.parametrize(("earlier", "minutes_since_end", "decided"), [
    (0, 0, False),
    (0, 0.99, False),
    (0, 1, True),
    (1, 1, False),  # second occurrence: 2 minutes
    (1, 1.99, False),
    (1, 2, True),
])
def test_retryable_exit_code_waits_for_backoff(earlier: int, minutes_since_end: float, decided: bool) -> None:
    view = history(*["FAILED"] * (earlier + 1), exit_code=75, ended_at=at(-minutes_since_end))
    decision = one(view)
    assert (decision is not None) == decided
    if decision is not None:
        assert (decision.action, decision.params["retry"]) == ("resubmit", earlier + 1)


# mem or time, factor, what the next attempt gets: rounded up, but never up by a float's last bit
@pytest.mark.parametrize(("field", "value", "factor", "grown"), [
    ("mem", 3000, 1.1, 3300),
    ("mem", 100, 1.1, 110),
    ("mem", 4096, 1.3, 5325),
    ("mem", 1001, 1.25, 1252),
    ("time", 60, 1.1, 66),
    ("time", 45, 1.5, 68),
])
def test_growth_is_rounded_up_exactly(field: str, value: int, factor: float, grown: int) -> None:
    cause = "out_of_memory" if field == "mem" else "timeout"
    policy = with_rule(cause, **{f"{field}_factor": factor})
    decision = one(history(cause.upper(), **{field: value}), policy)
    assert decision is not None and decision.resources is not None
    assert getattr(decision.resources, "mem_mb" if field == "mem" else "time_min") == grown


def test_a_bug_exit_code_gives_up_without_waiting() -> None:
    decision = one(history("FAILED", exit_code=1, ended_at=at(0)))
    assert decision is not None and decision.action == "give_up"


def test_backoff_without_end_time_does_not_wait() -> None:
    assert one(history("FAILED", exit_code=75, ended_at=None)) is not None


# --- what a decision records ----------------------------------------------------------------------

def test_decision_carries_its_inputs_and_changes() -> None:
    view = TaskView(4, (
        attempt("PREEMPTED", 1, decided=True, array="30"),
        attempt("OUT_OF_MEMORY", 2, decided=True, array="31"),
        attempt("OUT_OF_MEMORY", 3, mem=1500, array="32", index=4, exit_code=0, nodes="node[2-3]",
                ended_at=at(-1)),
    ))
    decision = one(view)
    assert decision is not None
    assert decision.inputs == {
        "job_id": "32_4", "attempt": 3, "slurm_state": "OUT_OF_MEMORY", "state": "OUT_OF_MEMORY",
        "exit_code": 0, "nodes": "node[2-3]", "elapsed_s": None, "max_rss": "", "ended_at": at(-1),
        "missing_since": None, "counts": {"preempted": 1, "out_of_memory": 2}, "failures": 2,
        "resources": {"mem_mb": 1500, "time_min": 60, "cpus_per_task": 1, "gpus": 0, "gpu_type": None,
                      "exclude": None}}
    assert decision.params == {"changes": {"mem_mb": [1500, 2250]}, "retry": 2, "max_retries": 3}
    assert decision.resources == Resources(mem_mb=2250, time_min=60)
    assert decision.reason == "out of memory (attempt 3); retry 2 of 3 with mem_mb 1500 → 2250."


def test_give_up_carries_inputs_but_no_resources() -> None:
    decision = one(history("CANCELLED", slurm_state="CANCELLED by 1234"))
    assert decision is not None
    assert decision.resources is None and decision.params == {}
    assert decision.inputs["slurm_state"] == "CANCELLED by 1234"
    assert decision.inputs["counts"] == {"cancelled": 1}


def test_other_resources_pass_through_a_resubmit() -> None:
    gpu = Resources(partition="gpu", gpus=2, gpu_type="a100", cpus_per_task=8, mem_mb=4000, time_min=60,
                    account="ml", qos="high", constraint="ib")
    view = TaskView(0, (replace(attempt("OUT_OF_MEMORY"), resources=gpu),))
    decision = one(view)
    assert decision is not None and decision.resources == replace(gpu, mem_mb=6000)


# --- node exclusion across the campaign -----------------------------------------------------------

def test_node_failing_in_two_attempts_is_excluded_for_every_resubmit() -> None:
    tasks = [
        TaskView(0, (attempt("NODE_FAIL", 1, nodes="node7", decided=True, array="12", index=0),
                     attempt("COMPLETED", 2, nodes="node2", array="20", index=0))),
        TaskView(1, (attempt("NODE_FAIL", 1, nodes="node7", array="12", index=1),)),
        TaskView(2, (attempt("OUT_OF_MEMORY", 1, nodes="node2", array="12", index=2),)),
        TaskView(3, (attempt("PREEMPTED", 1, nodes="node5", exclude="node9", array="12", index=3),)),
    ]
    excludes = {d.task_index: d.resources.exclude for d in decide(tasks, POLICY, NOW) if d.resources}
    assert excludes == {1: "node7", 2: "node7", 3: "node7,node9"}


def test_node_failing_once_is_excluded_only_for_its_own_task() -> None:
    tasks = [TaskView(1, (attempt("NODE_FAIL", 1, nodes="node7", index=1),)),
             TaskView(2, (attempt("OUT_OF_MEMORY", 1, nodes="node2", index=2),))]
    excludes = {d.task_index: d.resources.exclude for d in decide(tasks, POLICY, NOW) if d.resources}
    assert excludes == {1: "node7", 2: None}


def test_exclude_failed_node_false_keeps_the_node() -> None:
    decision = one(history("NODE_FAIL", nodes="node7"), with_rule("node_fail", exclude_failed_node=False))
    assert decision is not None and decision.resources is not None and decision.resources.exclude is None


# (state, nodes) of every attempt in the campaign, campaign_exclude_after, excluded nodes
@pytest.mark.parametrize(("attempts", "after", "expected"), [
    ([("NODE_FAIL", "node7"), ("NODE_FAIL", "node7")], 2, {"node7"}),
    ([("NODE_FAIL", "node7"), ("BOOT_FAIL", "node7")], 2, {"node7"}),
    ([("NODE_FAIL", "node7"), ("NODE_FAIL", "node8")], 2, set()),
    ([("NODE_FAIL", "node7"), ("NODE_FAIL", "node8")], 1, {"node7", "node8"}),
    ([("NODE_FAIL", "node[7-8]"), ("NODE_FAIL", "node8")], 2, {"node8"}),
    ([("OUT_OF_MEMORY", "node7"), ("FAILED", "node7"), ("NODE_FAIL", "node7")], 2, set()),
    ([("NODE_FAIL", "None assigned"), ("NODE_FAIL", "None assigned")], 2, set()),
])
def test_campaign_excluded_nodes(attempts: list[tuple[str, str]], after: int, expected: set[str]) -> None:
    tasks = [TaskView(i, (attempt(state, nodes=nodes, index=i),)) for i, (state, nodes) in enumerate(attempts)]
    assert campaign_excluded_nodes(tasks, replace(POLICY, campaign_exclude_after=after)) == expected


@pytest.mark.parametrize(("nodelist", "nodes"), [
    ("node1", ["node1"]),
    ("node[1-2]", ["node1", "node2"]),
    ("node[1-3,7],gpu01", ["node1", "node2", "node3", "node7", "gpu01"]),
    ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
    ("rack[1-2]a", ["rack1a", "rack2a"]),
    ("", []),
    ("None assigned", []),
])
def test_split_nodes(nodelist: str, nodes: list[str]) -> None:
    assert split_nodes(nodelist) == nodes


# --- pending siblings get the retry's resources in place --------------------------------------------

def sibling_campaign(trigger: str = "OUT_OF_MEMORY", **trigger_fields: object) -> list[TaskView]:
    return [
        TaskView(0, (attempt(trigger, array="12", index=0, **trigger_fields),)),  # type: ignore[arg-type]
        TaskView(1, (attempt("PENDING", array="12", index=1),)),
        TaskView(2, (attempt("PENDING", array="12", index=2),)),
        TaskView(3, (attempt("RUNNING", array="12", index=3),)),
        TaskView(4, (attempt("PENDING", array="13", index=0),)),
        TaskView(5, (attempt("PENDING", mem=2000, array="12", index=5),)),  # already bigger
        TaskView(6, (attempt("COMPLETED", array="12", index=6),)),
    ]


ROOMY = SiblingFacts((NodeShape(cpus=8, mem_mb=64000),), {})  # 8 tasks of 1000M or 1500M per node
TIGHT = SiblingFacts((NodeShape(cpus=8, mem_mb=8000),), {})  # 8 of 1000M, only 5 of 1500M


def test_oom_raises_pending_memory_across_the_campaign_where_a_node_holds_as_many() -> None:
    decisions = decide(sibling_campaign(), POLICY, NOW, siblings=ROOMY)
    assert [(d.task_index, d.action) for d in decisions] == [(0, "resubmit"), (1, "resize_pending"),
                                                           (2, "resize_pending"), (4, "resize_pending")]
    resize = decisions[1]
    assert resize.resources == Resources(mem_mb=1500, time_min=60)
    assert resize.attempt_token == "sub12.1" and resize.rule == "out_of_memory"
    assert resize.reason == ("pending, in the group of task 0, which hit out of memory; mem_mb 1000 → 1500 before "
                             "it starts: 1500M fits as many tasks per node (the campaign: 0 first attempts "
                             "started, 0% ended out of memory).")
    assert resize.params["array_job_id"] == "12" and decisions[3].params["array_job_id"] == "13"
    assert resize.params["changes"] == {"mem_mb": [1000, 1500]}
    assert resize.inputs["trigger_task"] == 0 and resize.inputs["job_id"] == "12_1"
    assert decisions[0].inputs["node_shapes"] == [[8, 64000, 0]]  # what replay sizes it by


def test_a_memory_raise_that_fits_fewer_per_node_waits_for_most_of_the_group_to_fail() -> None:
    decisions = decide(sibling_campaign(), POLICY, NOW, siblings=TIGHT)
    assert [d.action for d in decisions] == ["resubmit"]  # a quarter failing costs less than 3 of 8 slots
    assert decisions[0].inputs["siblings"].startswith("not raised: 1500M fits fewer tasks per node")
    failing = SiblingFacts(TIGHT.shapes, {CAMPAIGN: Ends(started=10, out_of_memory=6)})
    raised = [d.task_index for d in decide(sibling_campaign(), POLICY, NOW, siblings=failing)
              if d.action == "resize_pending"]
    assert raised == [1, 2, 4]


def test_the_group_is_the_parameter_value_the_failures_follow() -> None:
    def task(index: int, state: str, model: str) -> TaskView:
        return TaskView(index, (replace(attempt(state, index=index), params={"model": model, "seed": index}),))
    views = [task(0, "OUT_OF_MEMORY", "big"), task(1, "PENDING", "big"), task(2, "PENDING", "small")]
    ended = [({"model": "big", "seed": i}, "OUT_OF_MEMORY" if i % 4 else "COMPLETED") for i in range(12)]
    ended += [({"model": "small", "seed": i}, "COMPLETED") for i in range(12, 36)]
    facts = SiblingFacts(TIGHT.shapes, tally_first_ends(ended))
    resizes = [d for d in decide(views, POLICY, NOW, siblings=facts) if d.action == "resize_pending"]
    assert [d.task_index for d in resizes] == [1]  # big fails 75 %; the campaign 25 %: small stays as asked
    assert resizes[0].inputs["group"] == "model=big: 12 first attempts started, 75% ended out of memory"


def test_a_retrys_failure_raises_no_sibling() -> None:
    tasks = [TaskView(0, (attempt("OUT_OF_MEMORY", decided=True), attempt("TIMEOUT", 2, index=9))),
             TaskView(1, (attempt("PENDING", index=1),))]
    assert [d.action for d in decide(tasks, POLICY, NOW, siblings=ROOMY)] == ["resubmit"]


def test_nodes_the_campaign_excludes_join_every_pending_tasks_exclude() -> None:
    failed = [TaskView(i, (attempt("NODE_FAIL", nodes="node3", index=i),)) for i in range(2)]
    pending = [TaskView(2, (attempt("PENDING", index=2, exclude="node1"),)),
               TaskView(3, (attempt("PENDING", index=3, exclude="node3"),))]
    resizes = [d for d in decide(failed + pending, POLICY, NOW) if d.action == "resize_pending"]
    assert [(d.task_index, d.resources.exclude if d.resources else None) for d in resizes] == [(2, "node1,node3")]
    assert resizes[0].rule == "node_fail" and resizes[0].params["changes"] == {"exclude": ["node1", "node1,node3"]}


def test_node_failures_a_caller_counted_exclude_as_the_views_would() -> None:
    # the simulator counts NODE_FAIL attempts as they end and passes no view of the tasks behind them
    failed = [TaskView(i, (attempt("NODE_FAIL", nodes="node3", index=i),)) for i in range(2)]
    pending = [TaskView(2, (attempt("PENDING", index=2, exclude="node1"),))]
    counted = {"": count_node_failures(failed)[""]}
    assert counted == {"": {"node3": 2}}
    from_views = decide(failed + pending, POLICY, NOW)
    from_counts = decide(pending, POLICY, NOW, node_failures=counted)
    assert [(d.task_index, d.resources) for d in from_counts] == [
        (d.task_index, d.resources) for d in from_views if d.action == "resize_pending"] == [
        (2, Resources(mem_mb=1000, time_min=60, exclude="node1,node3"))]
    assert decide(pending, POLICY, NOW, node_failures={"": {"node3": 1}}) == []  # under campaign_exclude_after


def test_timeout_resizes_pending_siblings_time() -> None:
    resizes = [d for d in decide(sibling_campaign("TIMEOUT"), POLICY, NOW) if d.action == "resize_pending"]
    assert [(d.task_index, d.resources) for d in resizes] == [
        (1, Resources(mem_mb=1000, time_min=90)), (2, Resources(mem_mb=1000, time_min=90)),
        (5, Resources(mem_mb=2000, time_min=90))]
    assert "time_min 60 → 90 before it starts" in resizes[0].reason


@pytest.mark.parametrize(("policy", "tasks"), [
    pytest.param(with_rule("out_of_memory", resize_pending=False), sibling_campaign(), id="rule says no"),
    pytest.param(POLICY, sibling_campaign(mem=65536), id="trigger gave up at cap"),
    pytest.param(POLICY, sibling_campaign("NODE_FAIL"), id="node failure predicts nothing"),
    pytest.param(POLICY, sibling_campaign("OUT_OF_MEMORY", decided=True), id="trigger already answered"),
])
def test_no_resize(policy: Policy, tasks: list[TaskView]) -> None:
    assert [d for d in decide(tasks, policy, NOW) if d.action == "resize_pending"] == []


def test_two_triggers_in_one_array_resize_to_the_largest() -> None:
    tasks = [TaskView(0, (attempt("OUT_OF_MEMORY", mem=1000, index=0),)),
             TaskView(1, (attempt("OUT_OF_MEMORY", mem=3000, index=1),)),
             TaskView(2, (attempt("PENDING", mem=1000, index=2),))]
    decisions = decide(tasks, POLICY, NOW, siblings=ROOMY)
    resizes = [d for d in decisions if d.action == "resize_pending"]
    assert [(d.task_index, d.resources) for d in resizes] == [(2, Resources(mem_mb=4500, time_min=60))]


def test_resize_pending_siblings_takes_decisions_as_given() -> None:
    tasks = sibling_campaign()
    resubmit = decide_task(tasks[0], POLICY, NOW)
    assert resubmit is not None
    assert [d.task_index for d in resize_pending_siblings(tasks, [resubmit], POLICY, ROOMY)] == [1, 2, 4]
    assert resize_pending_siblings(tasks, [resubmit], POLICY) == []  # nodes unknown: memory stays as asked
    assert resize_pending_siblings(tasks, [], POLICY, ROOMY) == []


def test_sinfo_node_shapes_count_each_usable_node_once() -> None:
    # `sinfo -N --noheader -O NodeList:|,CPUs:|,Memory:|,Gres:|,StateLong:` on the lab (22.05),
    # node2 listed in two partitions, node4 drained
    text = ("node1|4|7800|gpu:a100:2(S:0)|idle|\nnode2|4|7800|gpu:a100:2(S:0)|mixed|\n"
            "node2|4|7800|gpu:a100:2(S:0)|mixed|\nnode3|8|15600|gpu:4|allocated|\nnode4|4|7800|(null)|drained|\n"
            "node5|4|7800|(null)|down*|\n")
    assert parse_node_shapes(text) == (NodeShape(4, 7800, 2), NodeShape(8, 15600, 4))


def test_first_ends_count_what_started_by_parameter_value() -> None:
    shares = tally_first_ends([({"m": "a"}, "OUT_OF_MEMORY"), ({"m": "a"}, "RUNNING"), ({"m": "b"}, "TIMEOUT"),
                               ({"m": "b"}, "PENDING")])
    assert shares[CAMPAIGN] == Ends(started=3, out_of_memory=1, timeout=1)
    assert shares[("m", "a")].share("out_of_memory") == 0.5 and shares[("m", "b")] == Ends(1, 0, 1)


def test_a_multi_node_tasks_slots_count_every_process_it_runs_on_a_node() -> None:
    """Left from issue 28: a 2-node task of 4 processes × 2 CPUs asks 8 CPUs of each 16-CPU node,
    so two fit, whatever its memory up to 64G; it was counted as one process's 2 CPUs (eight
    fit), so a raise 32G → 64G looked like it cost slots and was not carried to pending tasks."""
    from campaignctl.core.tick.siblings import costs_slots, per_node

    task = Resources(nodes=2, tasks_per_node=4, cpus_per_task=2, mem_mb=32000)
    node = NodeShape(cpus=16, mem_mb=128000)
    assert per_node(task, node) == 2
    assert not costs_slots(task, 64000, [node]) and costs_slots(task, 65000, [node])
