"""The node ledger (core/nodes/): evidence from a tick's views, scores that decay, exclusions that
expire into probation and are capped, and the crash-loop breaker — as a tick decides them."""

from __future__ import annotations

import statistics
from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.nodes.crash_loop import crash_loop, signature
from campaignctl.core.nodes.evidence import Completion, latest, node_decisions
from campaignctl.core.nodes.ledger import (
    EXCLUDED,
    FORGIVEN,
    PROBATION,
    WATCHED,
    Exclusion,
    NodeMark,
    exclusion,
    standings,
)
from campaignctl.core.nodes.node_rules import NodeRules
from campaignctl.core.spec.settings import CampaignSettings
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.tick import decide_tick
from campaignctl.core.tick.tick_facts import with_facts
from tests.core.test_decide import POLICY
from tests.core.test_tick import NOW, snapshot

RULES = NodeRules()
FOUR = ("node1", "node2", "node3", "node4")


def ended(task: int, state: str, node: str, *, number: int = 1, minutes_ago: int = 5, **facts: object) -> AttemptView:
    return AttemptView(f"t{task}.{number}", number, state, f"12_{task}", Resources(), slurm_state=state,
                       nodes=node, ended_at=(NOW - timedelta(minutes=minutes_ago)).isoformat(),
                       **facts)  # type: ignore[arg-type]


def mark(node: str, hours_ago: float, kind: str = "node_fail", weight: float = 1.0, campaign: str = "a") -> NodeMark:
    return NodeMark(node, NOW - timedelta(hours=hours_ago), kind, weight, campaign)


def test_a_node_failure_excludes_the_node_then_probation_then_a_clean_run_clears_it() -> None:
    [fresh] = standings([mark("node2", 0.1)], NOW, RULES)
    assert (fresh.state, fresh.expires) == (EXCLUDED, NOW - timedelta(hours=0.1) + timedelta(minutes=30))
    [later] = standings([mark("node2", 1)], NOW, RULES)
    assert later.state == PROBATION and later.score < 1.0
    assert standings([mark("node2", 1), NodeMark("node2", NOW, FORGIVEN)], NOW, RULES) == []
    # one half-weight piece of evidence is watched, never excluded
    [watched] = standings([mark("node3", 0.1, "slow", 0.5)], NOW, RULES)
    assert watched.state == WATCHED
    # two found slow in ticks an hour apart exclude it although the first decayed a little (0.9952);
    # a day apart they do not
    [twice] = standings([mark("node3", 1.1, "slow", 0.5), mark("node3", 0.1, "slow", 0.5)], NOW, RULES)
    assert twice.state == EXCLUDED and twice.score < 1.0
    [apart] = standings([mark("node3", 24.1, "slow", 0.5), mark("node3", 0.1, "slow", 0.5)], NOW, RULES)
    assert apart.state == WATCHED
    # and forgotten once it decayed below an eighth of the threshold (3 half-lives of 3 days)
    assert standings([mark("node3", 24 * 9.5, "slow", 0.5)], NOW, RULES) == []


def test_the_cap_keeps_three_quarters_of_the_partition_and_names_no_unknown_node() -> None:
    marks = [mark(n, 0.1, weight=1.0 + i) for i, n in enumerate(("node1", "node2", "node3", "gone9"))]
    found = exclusion(standings(marks, NOW, RULES), FOUR, RULES)
    assert found.nodes == ("node3",)  # the highest score of the partition's nodes; gone9 is not in it
    assert found.capped == ("node1", "node2")
    assert exclusion(standings(marks, NOW, RULES), FOUR[:3], RULES).nodes == ()  # a quarter of 3 is 0


def test_evidence_is_logged_once_per_attempt_and_node() -> None:
    views = [TaskView(0, (ended(0, "NODE_FAIL", "node2"),)),
             TaskView(1, (ended(1, "FAILED", "node3", cause="gpu_hardware",
                                evidence="[uncorrectable ECC error] RuntimeError: CUDA error: uncorrectable ECC"),))]
    first = node_decisions(views, (), Exclusion(), frozenset(), RULES, NOW)
    assert [(d.action, d.typed.node, d.typed.kind) for d in first] == [  # type: ignore[union-attr]
        ("suspect_node", "node2", "node_fail"), ("suspect_node", "node3", "hardware")]
    logged = frozenset((d.attempt_token, d.typed.node) for d in first)  # type: ignore[union-attr]
    assert node_decisions(views, (), Exclusion(), logged, RULES, NOW) == []


def test_repeated_failures_of_different_tasks_blame_a_node_only_where_they_concentrate() -> None:
    there = [TaskView(i, (ended(i, "FAILED", "node4", exit_code=1),)) for i in range(2)]
    found = node_decisions(there, (), Exclusion(), frozenset(), RULES, NOW)
    assert {(d.typed.node, d.typed.kind) for d in found} == {("node4", "repeated")}  # type: ignore[union-attr]
    everywhere = [TaskView(i, (ended(i, "FAILED", n, exit_code=1),)) for i, n in enumerate(FOUR * 2)]
    assert node_decisions(everywhere, (), Exclusion(), frozenset(), RULES, NOW) == []  # a bug, not a node


def test_a_slow_node_is_suspected_against_its_groups_median_on_other_nodes() -> None:
    done = [Completion(i, f"t{i}.1", n, NOW.isoformat(), 100 if n != "node3" else 220, 100)
            for i, n in enumerate(("node1", "node2", "node4", "node3", "node3"))]
    found = node_decisions([], done, Exclusion(), frozenset(), RULES, NOW)
    assert [(d.task_index, d.typed.node, d.typed.kind) for d in found] == [  # type: ignore[union-attr]
        (3, "node3", "slow"), (4, "node3", "slow")]
    assert "2.2× slower" in found[0].reason
    # twice slow reaches the threshold: excluded
    marks = [NodeMark("node3", NOW, "slow", d.typed.weight) for d in found]  # type: ignore[union-attr]
    assert standings(marks, NOW, RULES)[0].state == EXCLUDED


def test_the_rules_read_the_completions_that_ended_last_in_the_order_given() -> None:
    done = [Completion(i, f"t{i}.1", "node1", f"2026-11-30T10:0{9 - i}:00", 100, 100) for i in range(6)]
    assert [c.task for c in latest(done, 3)] == [0, 1, 2]  # ended 10:09, 10:08, 10:07
    tied = [Completion(i, f"t{i}.1", "node1", "2026-11-30T10:00:00", 100, 100) for i in range(4)]
    assert [c.task for c in latest(tied, 2)] == [2, 3]  # ties by token, as the store orders them
    assert latest(done) == done  # fewer than the window: all of them


def test_a_tick_excludes_the_ledgers_nodes_from_retries_and_pending_elements_and_clears_on_probation() -> None:
    failed = TaskView(0, (ended(0, "NODE_FAIL", "node1"),))
    waiting = TaskView(1, (AttemptView("t1.1", 1, "PENDING", "12_1", Resources(), slurm_state="PENDING"),))
    ledger = Exclusion(("node3",), (), {"node3": "node3: score 1 (node_fail in b)"})
    plan = decide_tick(with_facts(snapshot(failed, waiting), exclusion=ledger), POLICY, NOW)
    by_action = {d.action: d for d in plan.decisions}
    assert by_action["resubmit"].resources.exclude == "node1,node3"  # type: ignore[union-attr]
    assert "node ledger leaves out node3: score 1" in by_action["resubmit"].reason
    assert by_action["resize_pending"].resources.exclude == "node3"  # type: ignore[union-attr]
    assert by_action["suspect_node"].typed.node == "node1"  # type: ignore[attr-defined]
    probation = Exclusion(probation_since={"node2": NOW - timedelta(hours=1)})
    clean = Completion(5, "t5.1", "node2", NOW.isoformat(), 600, 10)
    [clear] = node_decisions([], [clean], probation, frozenset(), RULES, NOW)
    assert (clear.action, clear.typed.node) == ("clear_node", "node2")  # type: ignore[attr-defined]
    before = replace(clean, elapsed_s=7200)  # started before its probation: says nothing
    assert node_decisions([], [before], probation, frozenset(), RULES, NOW) == []


def pending(task: int, exclude: str | None) -> TaskView:
    return TaskView(task, (AttemptView(f"t{task}.1", 1, "PENDING", f"12_{task}", Resources(exclude=exclude),
                                       slurm_state="PENDING"),))


def test_a_node_the_ledger_no_longer_excludes_leaves_pending_work_and_retries_the_specs_own_and_failed_stay() -> None:
    """Before, a pending element kept every node ever pushed onto it: over a long queue the
    ledger's exclusions moved from node to node and the simulated 8-node campaigns came to
    exclude all eight (6,391 of 6,395 pending elements) and never started."""
    settings = CampaignSettings(tasks=4, exclude=frozenset({"node9"}))  # the spec's own `exclude: node9`
    # task 0: its first attempt died with node1, its second ran out of memory; node3 was excluded then
    retried = TaskView(0, (ended(0, "NODE_FAIL", "node1", minutes_ago=90),
                           replace(ended(0, "OUT_OF_MEMORY", "node2", number=2),
                                   resources=Resources(exclude="node1,node3,node9"))))
    stale, fresh = pending(1, "node3,node9"), pending(2, "node4,node9")
    ledger = Exclusion(("node4",), (), {"node4": "node4: score 1 (node_fail in b)"})  # node3's has ended
    plan = decide_tick(with_facts(snapshot(retried, stale, fresh, settings=settings), exclusion=ledger), POLICY, NOW)
    by_task = {d.task_index: d for d in plan.decisions if d.action in ("resubmit", "resize_pending")}
    assert by_task[0].resources.exclude == "node1,node4,node9"  # type: ignore[union-attr]
    assert by_task[1].resources.exclude == "node4,node9"  # type: ignore[union-attr]
    assert "nothing excludes node3 any longer" in by_task[1].reason
    assert by_task[1].inputs["let_back"] == ["node3"]
    assert 2 not in by_task  # already what is excluded now
    # nothing excluded now: the pending element keeps only the spec's node
    plan = decide_tick(snapshot(pending(1, "node3,node9"), settings=settings), POLICY, NOW)
    [shrunk] = [d for d in plan.decisions if d.action == "resize_pending"]
    assert shrunk.resources.exclude == "node9"  # type: ignore[union-attr]
    # a revision that did not record the spec's own nodes: nothing is taken off, as before
    plan = decide_tick(with_facts(snapshot(pending(1, "node3,node9")), exclusion=ledger), POLICY, NOW)
    [grown] = [d for d in plan.decisions if d.action == "resize_pending"]
    assert grown.resources.exclude == "node3,node4,node9"  # type: ignore[union-attr]



def test_a_node_on_probation_stays_out_of_pending_elements_until_it_is_cleared() -> None:
    """A pending element is one of an array's tasks: it keeps a node on probation out as a new
    array of several does. Before, probation let every pending element back onto the node and its
    probe pushed them all off again: two resizes of the whole queue per probation (a 3,000-task
    simulation on the default 8-node cluster: 85,961 node resizes, 25,256 since)."""
    settings = CampaignSettings(tasks=3, exclude=frozenset())
    kept, fresh = pending(1, "node3"), pending(2, None)
    ruled_out = Exclusion(("node3",), (), {"node3": "node3: score 1 (node_fail in b)"})
    on_probation = Exclusion(probation=("node3",), why={"node3": "node3: on probation"},
                             probation_since={"node3": NOW - timedelta(minutes=10)})
    for ledger in (ruled_out, on_probation):
        plan = decide_tick(with_facts(snapshot(kept, fresh, settings=settings), exclusion=ledger), POLICY, NOW)
        resized = {d.task_index: d.resources.exclude for d in plan.decisions  # type: ignore[union-attr]
                   if d.action == "resize_pending"}
        assert resized == {2: "node3"}  # the element that lacked it gains it; the other is left as it is
        [why] = [d.reason for d in plan.decisions if d.action == "resize_pending"]
        assert f"the node ledger leaves out {ledger.why['node3']}" in why
    # cleared (a clean run there): nothing keeps it out, the pending element is let back
    plan = decide_tick(snapshot(kept, settings=settings), POLICY, NOW)
    [back] = [d for d in plan.decisions if d.action == "resize_pending"]
    assert back.resources.exclude is None and back.inputs["let_back"] == ["node3"]  # type: ignore[union-attr]

def test_a_crash_loop_holds_the_campaign_naming_its_signature() -> None:
    evidence = "[site pattern] ValueError: corrupt shard 1234 at 0x7f3a"
    attempts = [replace(ended(0, "FAILED", "node1", number=n, minutes_ago=30 - n, exit_code=1, cause="bad_shard",
                              evidence=evidence.replace("1234", str(n))), decided=n < 3) for n in (1, 2, 3)]
    views = [TaskView(0, tuple(attempts))]
    hold = crash_loop(views, 3, frozenset())
    assert hold is not None and hold.action == "hold" and hold.rule == "crash_loop"
    assert signature(attempts[0]) == signature(attempts[2]) and signature(attempts[0]) in hold.reason
    assert crash_loop(views, 3, frozenset(a.token for a in attempts)) is None  # counted by an earlier hold
    assert crash_loop(views, 4, frozenset()) is None
    other = replace(attempts[1], evidence="[site pattern] KeyError: 'label'")
    assert crash_loop([TaskView(0, (attempts[0], other, attempts[2]))], 3, frozenset()) is None
    plan = decide_tick(snapshot(*views), replace(POLICY, causes={"bad_shard": "corrupt shard"},
                                                 rules={**POLICY.rules}), NOW)
    assert [d.action for d in plan.decisions if d.action in ("hold", "resubmit")] == ["hold"] and plan.paused


def test_across_tasks_only_named_failures_since_the_last_completion_make_a_loop() -> None:
    named = "[site pattern] ValueError: corrupt shard 9"
    three = [TaskView(i, (ended(i, "FAILED", "node1", minutes_ago=10 - i, exit_code=1, cause="bad_shard",
                                evidence=named),)) for i in range(3)]
    assert crash_loop(three, 3, frozenset()) is not None  # three tasks, one traceback
    assert crash_loop(three, 3, frozenset(), (NOW - timedelta(minutes=8, seconds=30)).isoformat()) is None
    bare = [TaskView(i, (ended(i, "FAILED", "node1", minutes_ago=10 - i, exit_code=1),)) for i in range(3)]
    assert crash_loop(bare, 3, frozenset()) is None  # exit 1 without a word: nothing says they are alike
    xid = [TaskView(i, (ended(i, "FAILED", f"node{i}", minutes_ago=10 - i, exit_code=1, cause="gpu_hardware",
                              evidence="[NVIDIA Xid] NVRM: Xid (PCI:0000:3b:00): 79"),)) for i in range(3)]
    assert crash_loop(xid, 3, frozenset()) is None  # a GPU's failures are the node ledger's


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(FOUR), st.sampled_from((50, 100, 100, 150, 220, 400))),
                min_size=1, max_size=40))
def test_a_node_is_slow_exactly_when_its_rate_is_a_factor_below_the_median_elsewhere(
        runs: list[tuple[str, int]]) -> None:
    """Against statistics.median over the group's attempts on the other nodes, ties and all (the
    rule takes that median without copying the group once per node)."""
    done = [Completion(i, f"t{i}.1", n, NOW.isoformat(), elapsed, 100) for i, (n, elapsed) in enumerate(runs)]
    expected = set()
    for c in done:
        others = [100 / o.elapsed_s for o in done if o.nodes != c.nodes]
        if len(others) >= 2 and 100 / c.elapsed_s * RULES.slow_factor <= statistics.median(others):
            expected.add((c.task, c.nodes))
    found = node_decisions([], done, Exclusion(), frozenset(), RULES, NOW)
    assert {(d.task_index, d.typed.node) for d in found if d.typed.kind == "slow"} == expected  # type: ignore[union-attr]


def test_a_slow_run_on_probation_does_not_clear_the_node() -> None:
    probation = Exclusion(probation_since={"node3": NOW - timedelta(hours=2)})
    done = [Completion(i, f"t{i}.1", n, NOW.isoformat(), 100 if n != "node3" else 300, 100)
            for i, n in enumerate(("node1", "node2", "node4", "node3"))]
    found = node_decisions([], done, probation, frozenset(), RULES, NOW)
    assert [(d.action, d.typed.node) for d in found] == [("suspect_node", "node3")]  # type: ignore[union-attr]


def test_one_task_at_a_time_goes_onto_a_node_on_probation() -> None:
    failed = [TaskView(i, (ended(i, "FAILED", "node1", exit_code=75),)) for i in range(2)]
    ledger = Exclusion(probation=("node2",), why={"node2": "node2: on probation"},
                       probation_since={"node2": NOW - timedelta(hours=1)})
    plan = decide_tick(with_facts(snapshot(*failed), exclusion=ledger), POLICY, NOW)
    first, second = [d for d in plan.decisions if d.action == "resubmit"]
    assert first.resources.exclude is None and "the one task let onto node2 on probation" in first.reason
    assert first.inputs["node_ledger"]["probing"] == ["node2"]  # type: ignore[index]
    assert second.resources.exclude == "node2"  # type: ignore[union-attr]
    # the probe is a mark: until it has had `exclude_for` to run, no other task goes there
    marks = [mark("node2", 2), NodeMark("node2", NOW - timedelta(minutes=5), "probe")]
    [probing] = standings(marks, NOW, RULES)
    assert probing.state == "probing" and exclusion([probing], FOUR, RULES).nodes == ("node2",)
    [again] = standings([mark("node2", 2), NodeMark("node2", NOW - timedelta(minutes=40), "probe")], NOW, RULES)
    assert again.state == PROBATION
