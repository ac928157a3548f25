"""The tick's start section (core/tick/starts.py): a campaign's first attempts sized, packed and cut
into arrays, one `start` decision each with its evidence, carried out like any resubmit."""

from __future__ import annotations

from dataclasses import replace

from campaignctl.core.decisions.action_records import Start
from campaignctl.core.decisions.actions import plan_actions
from campaignctl.core.policy.policy import Policy
from campaignctl.core.policy.right_size_section import RightSize
from campaignctl.core.resources import Resources
from campaignctl.core.spec.pack_spec import PackSpec
from campaignctl.core.tick.starts import StartFacts, Unstarted, decide_starts
from tests.core.test_right_size import USED_150, sample

ASKED = Resources(mem_mb=1024, time_min=10)


def facts(n: int, max_array: int = 1001, **kw: object) -> StartFacts:
    return StartFacts(tuple(Unstarted(i, ASKED, "rung 0") for i in range(n)), max_array, **kw)  # type: ignore[arg-type]


def test_a_grid_larger_than_max_array_size_is_one_start_per_array_each_with_its_evidence() -> None:
    decided = decide_starts(facts(2500, max_array=1000, max_parallel=4), Policy())
    assert [(d.rule, d.action, d.attempt_token, d.task_index) for d in decided] == [
        ("start", "start", "start.0", 0), ("start", "start", "start.1000", 1000),
        ("start", "start", "start.2000", 2000)]
    assert all(d.mode == "enforce" and d.resources == ASKED for d in decided)
    first = decided[0]
    p = first.typed
    assert isinstance(p, Start) and p.tasks == tuple(range(1000)) and p.throttle == 4 and p.per_element == 1
    assert first.inputs["max_array_size"] == 1000 and first.inputs["spec_resources"]["mem_mb"] == 1024
    assert first.reason == ("first attempts of 1000 tasks (0-999): one array of 1000 element(s), 4 at once, "
                            "each task 1024M / 10 min.")
    plan = plan_actions(decided, lambda _t: None, 1000, None, iter(["a", "b", "c"]).__next__)
    assert [(g.token, g.chunk.array_spec, g.chunk.size) for g in plan.resubmits] == [
        ("a", "0-999%4", 1000), ("b", "0-999%4", 1000), ("c", "0-499%4", 500)]


def test_right_size_sizes_a_group_with_enough_samples_and_records_size_first_beside_its_start() -> None:
    tasks = (Unstarted(0, ASKED, "rung 0"), Unstarted(1, ASKED, "rung 0, model=b"), Unstarted(2, ASKED, "rung 0"))
    policy = replace(Policy(), right_size=RightSize(enabled=True, min_samples=3, mode="enforce"))
    decided = decide_starts(StartFacts(tasks, 1001, samples={"rung 0": tuple(USED_150)}, profiled=True), policy)
    assert [(d.action, d.attempt_token) for d in decided] == [("start", "start.0"), ("size_first", "start.0"),
                                                              ("start", "start.1")]
    sized, record, plain = decided
    assert sized.resources == Resources(mem_mb=256, time_min=2) and plain.resources == ASKED
    assert isinstance(sized.typed, Start) and sized.typed.tasks == (0, 2)
    assert sized.inputs["right_size"]["samples"] == 3 and sized.inputs["spec_resources"]["mem_mb"] == 1024
    assert "(right-sized)" in sized.reason and "instead of 1024M / 10 min" in record.reason
    # the record joins its start's submission: the profile counts the attempts as right-sized by it
    plan = plan_actions(decided, lambda _t: None, 1001, None, iter(["s1", "s2"]).__next__)
    assert [(d.action, token) for d, token in plan.planned()] == [("start", "s1"), ("start", "s2"),
                                                                  ("size_first", "s1")]


def test_in_shadow_right_size_only_says_what_it_would_ask_and_the_spec_s_request_goes_out() -> None:
    policy = replace(Policy(), right_size=RightSize(enabled=True, min_samples=3, mode="shadow"))
    decided = decide_starts(facts(2, samples={"rung 0": tuple(USED_150)}, profiled=True), policy)
    start, record = decided
    assert start.resources == ASKED and start.mode == "enforce"
    assert record.mode == "shadow" and "would submit with (shadow) 256M / 2 min" in record.reason


def test_a_fixed_pack_shapes_the_array_and_auto_without_history_packs_nothing() -> None:
    each = Resources(mem_mb=500, time_min=10, gpus=1)
    tasks = tuple(Unstarted(i, each, "rung 0") for i in range(10))
    [start, pack] = decide_starts(StartFacts(tasks, 1001, pack=PackSpec(per_gpu=4, cpus=2)), Policy())
    p = start.typed
    assert isinstance(p, Start) and (p.per_element, p.per_gpu, p.cpus) == (4, 4, 2)
    assert pack.action == "pack" and pack.attempt_token == start.attempt_token
    [group] = plan_actions([start, pack], lambda _t: None, 1001, None, lambda: "t").resubmits
    assert (group.chunk.elements, group.chunk.array_spec) == (3, "0-2")  # 4 + 4 + 2 tasks
    auto = StartFacts(tasks, 1001, pack=PackSpec(per_gpu=8, auto=True), profiled=True,
                      samples={"rung 0": (sample(150),)})
    [unpacked, said] = decide_starts(auto, Policy())
    assert isinstance(unpacked.typed, Start) and unpacked.typed.per_element == 1
    assert "not packed" in said.reason


def test_nothing_unstarted_starts_nothing() -> None:
    assert decide_starts(facts(0), Policy()) == []
