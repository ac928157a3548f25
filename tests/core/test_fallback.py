"""GPU-type fallback and replacement as tables: who waits long enough, which type has room and
costs least, and how a cancel requested by campaignctl turns into a resubmission."""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import datetime, timedelta

import pytest

from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.decisions.requests import LoggedRequest, standing_requests, with_requests
from campaignctl.core.policy.policy import Policy, Rule
from campaignctl.core.policy.policy_sections import Fallback, Prices
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.decide import decide
from campaignctl.core.tick.fallback import candidates, free_gpus_by_type, parse_sinfo_gpus, plan_fallbacks

NOW = datetime(2026, 11, 23, 12, 0)
TYPES = ["a100", "v100", "t4"]
POLICY = Policy(fallback=Fallback(after_s=600, max_moves=2),
                prices=Prices(gpu_hour={"a100": 3.0, "v100": 1.5, "t4": 0.5}),
                rules={"cancelled": Rule("give_up")})
A100 = Resources(gpus=2, gpu_type="a100", time_min=120)

# sinfo -N -O 'NodeList:|,Gres:|,GresUsed:|,StateLong:' on the lab cluster (a100 nodes full),
# plus a drained t4 node; node lines repeat once per partition
SINFO = """\
node1|gpu:a100:2|gpu:a100:2(IDX:0-1)|allocated
node2|gpu:a100:2|gpu:a100:2(IDX:0-1)|allocated
node3|gpu:v100:2|gpu:v100:0(IDX:N/A)|mixed
node4|gpu:v100:2|gpu:v100:1(IDX:0)|mixed
node5|gpu:t4:4|gpu:t4:0(IDX:N/A)|drained
node1|gpu:a100:2|gpu:a100:2(IDX:0-1)|allocated
"""


def pending(index: int = 0, res: Resources = A100, token: str | None = None) -> TaskView:
    return TaskView(index, (AttemptView(token or f"t.{index}", 1, "PENDING", f"12_{index}", res),))


def test_free_gpus_per_type_is_the_most_on_one_usable_node() -> None:
    assert free_gpus_by_type(parse_sinfo_gpus(SINFO)) == {"a100": 0, "v100": 2, "t4": 0}


@pytest.mark.parametrize(("waited_min", "moves", "requested", "expected"), [
    (11, 0, False, [0]),    # pending longer than `after`
    (9, 0, False, []),      # not yet
    (11, 2, False, []),     # moved twice already: stays where it is
    (11, 0, True, []),      # a cancel is already asked for
])
def test_candidates_waited_long_enough(waited_min: int, moves: int, requested: bool, expected: list[int]) -> None:
    since = {"t.0": NOW - timedelta(minutes=waited_min)}
    out = candidates([pending()], TYPES, POLICY, NOW, since, {0: moves}, {"t.0"} if requested else set())
    assert [v.index for v in out] == expected


def test_no_fallback_without_a_second_type_or_with_the_rule_off() -> None:
    since = {"t.0": NOW - timedelta(hours=1)}
    assert candidates([pending()], ["a100"], POLICY, NOW, since, {}, set()) == []
    assert candidates([pending()], TYPES, replace(POLICY, fallback=Fallback()), NOW, since, {}, set()) == []


def test_the_cheapest_type_with_room_wins_and_each_move_takes_its_gpus() -> None:
    free = {"a100": 0, "v100": 2, "t4": 4}
    decisions = plan_fallbacks([pending(0), pending(1), pending(2)], TYPES, POLICY,
                               {"12_0": "Resources", "12_1": "Priority", "12_2": "Resources"}, free)
    assert [d.params["changes"] for d in decisions] == [{"gpu_type": ["a100", "t4"]}, {"gpu_type": ["a100", "t4"]},
                                                         {"gpu_type": ["a100", "v100"]}]  # t4 full after two
    first = decisions[0]
    assert (first.rule, first.action, first.params["only_if"]) == ("gpu_fallback", "cancel", "PENDING")
    assert first.inputs["free_gpus"] == {"a100": 0, "v100": 2, "t4": 4}
    assert "(at most 2.00 vs 12.00 at its time limit)" in first.reason


@pytest.mark.parametrize("reason", ["JobArrayTaskLimit", "JobHeldUser", "JobHeldAdmin", "Dependency", "BeginTime"])
def test_a_task_waiting_for_something_a_gpu_type_cannot_change_stays(reason: str) -> None:
    assert plan_fallbacks([pending()], TYPES, POLICY, {"12_0": reason}, {"v100": 2}) == []


def test_no_move_when_no_other_type_has_room() -> None:
    assert plan_fallbacks([pending()], TYPES, POLICY, {"12_0": "Resources"}, {"a100": 0, "v100": 1}) == []


def requested_cancel(token: str, status: str = "applied", only_if: str = "PENDING") -> LoggedRequest:
    return LoggedRequest(0, token, "gpu_fallback", "cancel",
                         {"changes": {"gpu_type": ["a100", "v100"]}, "only_if": only_if,
                          "replacement": asdict(replace(A100, gpu_type="v100"))}, "pending on a100", status)


def cancelled(nodes: str = "") -> TaskView:
    return TaskView(0, (AttemptView("t.0", 1, "CANCELLED", "12_0", A100, slurm_state="CANCELLED by 0",
                                    nodes=nodes),))


def test_our_cancel_turns_into_a_resubmission_with_the_new_type_and_is_no_failure() -> None:
    views = with_requests([cancelled()], standing_requests([requested_cancel("t.0")]))
    [d] = decide(views, POLICY, NOW)
    assert (d.rule, d.action) == ("gpu_fallback", "resubmit")
    assert d.resources is not None and d.resources.gpu_type == "v100" and d.resources.gpus == 2
    assert d.reason == ("cancelled by campaignctl's gpu_fallback decision (attempt 1); "
                        "resubmitted with gpu_type a100 → v100.")


def test_a_cancel_that_found_the_job_already_running_is_not_a_replacement() -> None:
    # the element started before scancel --state=PENDING; someone cancelled it later: the policy decides
    views = with_requests([cancelled(nodes="node1")], standing_requests([requested_cancel("t.0")]))
    [d] = decide(views, POLICY, NOW)
    assert (d.rule, d.action) == ("cancelled", "give_up")


def test_a_cancel_that_failed_asks_for_nothing() -> None:
    views = with_requests([cancelled()], standing_requests([requested_cancel("t.0", status="failed")]))
    assert [(d.rule, d.action) for d in decide(views, POLICY, NOW)] == [("cancelled", "give_up")]


def test_resize_next_reaches_the_tasks_next_attempt() -> None:
    req = LoggedRequest(0, "t.0", "data_starved", "resize_next", {"changes": {"cpus_per_task": [1, 4]}}, "", "applied")
    failed = TaskView(0, (AttemptView("t.0", 1, "NODE_FAIL", "12_0", Resources(cpus_per_task=1), nodes="node2"),))
    policy = replace(POLICY, max_failures=3, rules={"node_fail": Rule("resubmit", max_retries=3)})
    [d] = decide(with_requests([failed], standing_requests([req])), policy, NOW)
    assert d.action == "resubmit" and d.resources is not None and d.resources.cpus_per_task == 4
    assert d.params["changes"] == {"cpus_per_task": [1, 4]}


def test_a_multi_node_task_is_not_moved_on_one_nodes_free_gpus() -> None:
    # v100 has 2 free on one node: room for a one-node task, no evidence of room on two nodes
    two_nodes = replace(A100, nodes=2)
    assert plan_fallbacks([pending(res=two_nodes)], TYPES, POLICY, {"12_0": "Resources"}, {"v100": 2}) == []
    assert plan_fallbacks([pending()], TYPES, POLICY, {"12_0": "Resources"}, {"v100": 2}) != []
