"""right_size: the figures a profile's samples give (core/tick/right_size.py), the in-place lowering of
pending siblings, the policy section's reader and the spec's `profile:` key."""

from __future__ import annotations

from dataclasses import replace

import pytest

from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.packing.profile_stats import campaign_use, profile_stats
from campaignctl.core.policy.policy import Policy, policy_from_dict, policy_to_dict
from campaignctl.core.policy.right_size_section import Margin, RightSize
from campaignctl.core.resources import Resources
from campaignctl.core.spec.spec import validate_spec
from campaignctl.core.tick.right_size import UsageSample, plan_lowering, propose, quantile, size_first
from tests.core.test_policy import spec_problems, spec_with

ASKED = Resources(mem_mb=1024, time_min=10)
ON = RightSize(enabled=True, min_samples=3, mode="enforce")


def sample(rss: float, elapsed: int = 6, state: str = "COMPLETED", campaign: str = "a", group: str = "rung 0",
           requested: Resources = ASKED, right_sized: bool = False) -> UsageSample:
    return UsageSample(campaign, group, state, rss, elapsed, requested, right_sized=right_sized)


USED_150 = [sample(150), sample(160), sample(182.6, elapsed=8)]


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([1, 2, 3, 4, 5], 0.5, 3), ([1, 2, 3, 4, 5], 0.95, 5), ([5, 1], 0.5, 1), ([7], 0.95, 7),
    (list(range(1, 101)), 0.95, 95)])
def test_quantile_is_nearest_rank_a_value_that_was_seen(values: list[float], q: float, expected: float) -> None:
    assert quantile(values, q) == expected


@pytest.mark.parametrize(("section", "asked", "caps", "expected"), [
    # 182.6 × 1.2 = 219 → 256M (64M steps); 8 s × 1.3 → 2 min (the floor)
    (ON, ASKED, (None, None), (256, 2)),
    (replace(ON, lower=False), ASKED, (None, None), (1024, 10)),  # never below what the spec asks
    (ON, Resources(mem_mb=128, time_min=1), (None, None), (256, 2)),  # raise: true asks more
    (replace(ON, raise_=False), Resources(mem_mb=128, time_min=1), (None, None), (128, 1)),
    (ON, Resources(mem_mb=128, time_min=1), (192, None), (192, 2)),  # within the policy's mem_cap
    (replace(ON, mem=Margin(0.5, 1.0)), ASKED, (None, None), (192, 2)),  # median 160 → 192M
])
def test_propose_takes_the_quantile_times_margin_within_the_spec_and_caps(
        section: RightSize, asked: Resources, caps: tuple[int | None, int | None],
        expected: tuple[int, int]) -> None:
    sizing = propose(USED_150, section, asked, *caps)
    assert sizing is not None
    assert (sizing.mem_mb, sizing.time_min) == expected
    assert sizing.evidence["samples"] == 3 and sizing.evidence["rss_q_mb"] in (160, 182.6)


def test_an_io_bound_group_s_evidence_counts_its_labels_and_says_its_gpus_stay() -> None:
    streaming = [replace(s, bottleneck=b) for s, b in zip(USED_150, ("io", "io", "compute"), strict=True)]
    sizing = propose(streaming, ON, ASKED)
    assert sizing is not None and sizing.evidence["bottlenecks"] == {"compute": 1, "io": 2}
    assert sizing.evidence["gpus"] == ("kept as asked: 2 of 3 attempts of the group were bound by I/O; "
                                       "more GPUs would wait on the same I/O")
    computing = propose([replace(s, bottleneck="compute") for s in USED_150], ON, ASKED)
    assert computing is not None and "gpus" not in computing.evidence
    assert "bottlenecks" not in (propose(USED_150, ON, ASKED) or sizing).evidence  # no telemetry, no label


def test_too_few_samples_propose_nothing() -> None:
    assert propose(USED_150[:2], ON, ASKED) is None
    assert propose(USED_150, replace(ON, min_samples=4), ASKED) is None


def test_an_oom_or_timeout_counts_at_its_limit_so_the_profile_learns_and_counts_the_miss() -> None:
    small = Resources(mem_mb=256, time_min=2)
    samples = [*USED_150, sample(250, state="OUT_OF_MEMORY", requested=small, right_sized=True),
               sample(100, elapsed=119, state="TIMEOUT", requested=small, right_sized=True)]
    sizing = propose(samples, ON, ASKED)
    assert sizing is not None
    assert sizing.mem_mb == 320  # the OOM's 256M limit × 1.2 = 307 → 320M, no longer 256M
    assert sizing.time_min == 3  # the TIMEOUT's 120 s × 1.3 = 156 s → 3 min
    assert (sizing.evidence["right_sized"], sizing.evidence["wrong"]) == (2, 2)
    reason = size_first("abc", 0, [0], "rung 0", sizing, "enforce").reason
    assert reason.endswith("Right-sizing was wrong 2 of 2 times so far (OOM/TIMEOUT).")


def pending(index: int, token: str, resources: Resources = ASKED, state: str = "PENDING") -> TaskView:
    return TaskView(index, (AttemptView(token, 1, state, f"40_{index}", resources),))


def test_pending_siblings_that_over_ask_are_lowered_once_each() -> None:
    views = [pending(3, "t.3"), pending(4, "t.4"), pending(5, "t.5", state="RUNNING"),
             pending(6, "t.6", Resources(mem_mb=256, time_min=2)), pending(7, "t.7")]
    groups = {i: "rung 0" for i in range(8)}
    decisions = plan_lowering(views, USED_150, ON, groups, lowered={"t.7"})
    assert [(d.task_index, d.action, d.rule) for d in decisions] == [(3, "resize_pending", "right_size"),
                                                                      (4, "resize_pending", "right_size")]
    d = decisions[0]
    # the samples call for 2 minutes, but the job went out with --signal=USR2@90 (10 minutes asked),
    # which scontrol cannot move: under 4 minutes the signal could come in the task's first minute
    assert d.params["changes"] == {"mem_mb": [1024, 256], "time_min": [10, 4]}
    assert d.params["array_job_id"] == "40" and d.resources == Resources(mem_mb=256, time_min=4)
    assert "lowered to 256M / 4 min" in d.reason and d.inputs["samples"] == 3
    assert d.inputs["signal_floor_min"] == 4 and d.inputs["proposed"] == {"mem_mb": 256, "time_min": 2}


@pytest.mark.parametrize(("asked_min", "lowered_min"), [(10, 4), (4, 4), (3, 3), (2, 2)])
def test_a_pending_jobs_time_is_never_lowered_past_where_its_warning_signal_would_come_at_its_start(
        asked_min: int, lowered_min: int) -> None:
    """3 minutes asked: USR2@60 (3 min is the least that allows it); 2: no signal, free to lower."""
    [d] = plan_lowering([pending(3, "t.3", Resources(mem_mb=1024, time_min=asked_min))], USED_150, ON,
                        {3: "rung 0"}, set())
    assert d.resources is not None and d.resources.time_min == lowered_min
    assert ("time_min" in d.params["changes"]) == (asked_min != lowered_min)
    signal = Resources(time_min=asked_min).warning_signal_delay_s
    if signal is not None:  # the lowered limit still leaves the signal a minute after start, at worst
        assert lowered_min * 60 - signal - 60 >= 60


def test_lowering_never_raises_and_uses_only_the_tasks_own_group() -> None:
    tiny = Resources(mem_mb=128, time_min=1)
    assert plan_lowering([pending(3, "t.3", tiny)], USED_150, ON, {3: "rung 0"}, set()) == []
    assert plan_lowering([pending(3, "t.3")], USED_150, ON, {3: "rung 1"}, set()) == []


def test_the_submit_decision_names_its_evidence() -> None:
    sizing = propose(USED_150, ON, ASKED)
    assert sizing is not None
    d = size_first("abc", 0, [0, 1, 2], "rung 0", sizing, "enforce")
    assert (d.action, d.attempt_token, d.params["mem_mb"], d.params["tasks"]) == ("size_first", "abc.0", 256, [0, 1, 2])
    assert "submitted with 256M / 2 min instead of 1024M / 10 min" in d.reason
    assert "would submit with (shadow)" in size_first("abc", 0, [0], "rung 0", sizing, "shadow").reason


def test_profile_stats_and_requested_vs_used() -> None:
    samples = [*USED_150, sample(170, campaign="b", requested=Resources(mem_mb=256, time_min=2), right_sized=True)]
    [group] = profile_stats(samples)
    assert (group.samples, group.campaigns, group.right_sized, group.wrong) == (4, ("a", "b"), 1, 0)
    assert group.rss_mb is not None and (group.rss_mb.p50, group.rss_mb.max) == (160, 182.6)
    use = {u.campaign: u for u in campaign_use(samples, ON)}
    assert (use["a"].asked_mem_mb, use["a"].used_rss_p95_mb, use["a"].would_ask_mem_mb) == (1024, 182.6, 256)
    assert use["b"].asked_mem_mb == 256


# --- the policy section and the spec key ----------------------------------------------------

def test_the_section_is_read_and_survives_the_store() -> None:
    policy = spec_with("right_size: {mem: {quantile: 0.9, margin: 1.5}, min_samples: 8, raise: false, "
                       "mode: enforce}").policy
    section = policy.right_size
    assert section == RightSize(True, Margin(0.9, 1.5), Margin(0.95, 1.3), 8, True, False, "enforce")
    assert policy.mode_of("right_size") == "enforce"
    assert policy_from_dict(policy_to_dict(policy)) == policy
    assert Policy().digest == policy_from_dict(policy_to_dict(Policy())).digest
    assert "right_size" not in policy_to_dict(Policy())  # older policies keep their digest


@pytest.mark.parametrize(("line", "fragment"), [
    ("right_size: {mem: {quantile: 1.5}}", "right_size.mem.quantile: must be a quantile from 0.5 to 1"),
    ("right_size: {time: {margin: 0.8}}", "right_size.time.margin: must be a multiplier from 1 to 10"),
    ("right_size: {min_samples: 0}", "right_size.min_samples: must be a whole number from 1 to 100000"),
    ("right_size: {mode: always}", "'always' is not allowed; use one of: enforce, shadow"),
    ("right_size: {lower: yes please}", "right_size.lower: must be true or false"),
    ("right_size: {memory: {}}", "memory"),
])
def test_bad_right_size_values_name_the_key_and_what_is_allowed(line: str, fragment: str) -> None:
    assert fragment in spec_problems(line)


PROFILE_SPEC = """\
name: t
command: [echo, "{model}", "{seed}"]
matrix: {model: [a, b], seed: [1, 2]}
"""


def test_profile_key_names_the_kind_of_work_and_its_groups() -> None:
    spec = validate_spec(parse_yaml(PROFILE_SPEC + "profile: {name: nano-small, by: [model]}\n", "s.yaml"), "/p")
    assert spec.settings()["profile"] == {"name": "nano-small", "by": ["model"]}
    assert [spec.group_of(i) for i in range(4)] == ["rung 0, model=a", "rung 0, model=a",
                                                    "rung 0, model=b", "rung 0, model=b"]
    plain = validate_spec(parse_yaml(PROFILE_SPEC + "profile: nano-small\n", "s.yaml"), "/p")
    assert plain.group_of(3) == "rung 0"


@pytest.mark.parametrize(("line", "fragment"), [
    ("profile: {name: nano, by: [lr]}", "profile.by: must be a list of task parameter names from matrix/tasks: "
                                        "model, seed"),
    ("profile: 'bad name'", "'bad name' is not allowed; use 1-64 characters"),
    ("profile: {by: [model]}", "profile.name"),
])
def test_bad_profiles_say_what_is_allowed(line: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(parse_yaml(PROFILE_SPEC + line + "\n", "s.yaml"), "/p")
    assert fragment in info.value.message
