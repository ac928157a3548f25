"""Utilisation rules from recorded telemetry windows: one row per situation, asserting the
decision a user reads in `campaignctl log` and what the next attempt or the siblings get."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.policy.policy import Policy
from campaignctl.core.policy.policy_sections import DataStarved, GpuIdle, Utilisation
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.utilisation import classify, decide_utilisation, window_of
from campaignctl.core.usage.telemetry import Summary, fold

WINDOW = 60
ON = Utilisation(window_s=WINDOW, gpu_low_pct=20, cpu_busy_pct=80, cpu_idle_pct=30,
                 data_starved=DataStarved("more_cpus", cpu_factor=2, max_cpus=8),
                 gpu_idle=GpuIdle("fewer_gpus", gpu_factor=0.5))
POLICY = Policy(utilisation=ON)


def recorded(cpu: float, gpu: float | None, seconds: int = 90, every: int = 10) -> Summary:
    """A telemetry file as the sampler writes it: one line every `every` s for `seconds`."""
    lines = [json.dumps({"t": 1000.0 + t, "cpu_pct": cpu, "rss_mb": 500.0, "nproc": 3,
                         "gpus": [] if gpu is None else [{"index": 0, "util_pct": gpu}]})
             for t in range(0, seconds + 1, every)]
    return fold(Summary(), lines)


def running(index: int = 0, cpus: int = 2, gpus: int = 4, state: str = "RUNNING") -> TaskView:
    return TaskView(index, (AttemptView(f"tok.{index}", 1, state, f"12_{index}",
                                        Resources(cpus_per_task=cpus, gpus=gpus, mem_mb=1000)),))


@pytest.mark.parametrize(("cpu", "gpu", "cpus", "expected"), [
    (190.0, 5.0, 2, "data_starved"),   # both CPUs busy, GPU starved
    (170.0, 5.0, 2, "data_starved"),   # 85 % of 2 CPUs: busy enough
    (150.0, 5.0, 2, None),             # 75 %: neither busy nor idle
    (40.0, 5.0, 2, "gpu_idle"),        # 20 % of 2 CPUs and an idle GPU
    (190.0, 60.0, 2, None),            # GPU busy: nothing to fix
    (190.0, None, 2, None),            # no GPU figures: no decision on missing data
])
def test_classify_a_covered_window(cpu: float, gpu: float | None, cpus: int, expected: str | None) -> None:
    window = window_of(recorded(cpu, gpu), WINDOW)
    assert window is not None
    assert classify(window, Resources(cpus_per_task=cpus, gpus=1), ON) == expected


def test_a_window_not_yet_covered_decides_nothing() -> None:
    assert window_of(recorded(190.0, 5.0, seconds=30), WINDOW) is None  # 30 s of a 60 s window
    assert decide_utilisation([running()], {"tok.0": recorded(190.0, 5.0, seconds=30)}, POLICY, 1, ()) == []


def test_a_task_without_gpus_is_never_gpu_idle() -> None:
    window = window_of(recorded(10.0, 0.0), WINDOW)
    assert window is not None and classify(window, Resources(cpus_per_task=2, gpus=0), ON) is None


def test_data_starved_gives_the_next_attempt_and_pending_siblings_more_cpus() -> None:
    views = [running(0), running(1, state="PENDING"), running(2, state="PENDING"),
             running(3, cpus=4, state="PENDING")]  # already has 4: left alone
    decisions = decide_utilisation(views, {"tok.0": recorded(190.0, 4.0)}, POLICY, 1, ())
    assert [(d.task_index, d.action) for d in decisions] == [(0, "resize_next"), (1, "resize_pending"),
                                                              (2, "resize_pending")]
    trigger = decisions[0]
    assert trigger.rule == "data_starved" and trigger.resources == replace(views[0].latest.resources, cpus_per_task=4)
    assert trigger.reason == ("data-starved: GPUs at 4% while CPUs ran at 190% of one core (2 allocated) over 60 s; "
                              "the next attempt gets cpus_per_task 2 → 4.")
    assert trigger.inputs["window"] == {"samples": 7, "span_s": 60.0, "cpu_mean_pct": 190.0, "gpu_mean_pct": 4.0,
                                        "window_s": 60}
    assert decisions[1].params["changes"] == {"cpus_per_task": [2, 4]}
    assert decisions[1].params["array_job_id"] == "12"


def test_more_cpus_stops_at_the_cap_and_fires_once_per_attempt() -> None:
    capped = replace(POLICY, utilisation=replace(ON, data_starved=replace(ON.data_starved, max_cpus=2)))
    assert decide_utilisation([running(0)], {"tok.0": recorded(190.0, 4.0)}, capped, 1, ()) == []
    assert decide_utilisation([running(0)], {"tok.0": recorded(190.0, 4.0)}, POLICY, 1,
                              {("tok.0", "data_starved")}) == []


def test_gpu_idle_halves_the_gpus_of_the_next_attempt_never_below_the_minimum() -> None:
    [d] = decide_utilisation([running(0, gpus=4)], {"tok.0": recorded(20.0, 2.0)}, POLICY, 1, ())
    assert (d.rule, d.action, d.params["changes"]) == ("gpu_idle", "resize_next", {"gpus": [4, 2]})
    assert decide_utilisation([running(0, gpus=2)], {"tok.0": recorded(20.0, 2.0)}, POLICY, 2, ()) == []


def test_gpu_idle_with_cancel_running_cancels_only_if_still_running() -> None:
    cancelling = replace(POLICY, utilisation=replace(ON, gpu_idle=replace(ON.gpu_idle, cancel_running=True)))
    [d] = decide_utilisation([running(0, gpus=4)], {"tok.0": recorded(20.0, 2.0)}, cancelling, 1, ())
    assert d.action == "cancel" and d.params["only_if"] == "RUNNING"
    assert d.params["replacement"]["gpus"] == 2  # type: ignore[index]


def test_rules_are_off_until_a_policy_turns_them_on() -> None:
    assert decide_utilisation([running(0)], {"tok.0": recorded(190.0, 4.0)}, Policy(), 1, ()) == []


def test_a_multi_process_attempt_is_left_alone() -> None:
    # the window is one rank's (or one torchrun's) process tree on the first node: it does not
    # speak for the others, and fewer GPUs per node would break one process per GPU
    window = window_of(recorded(40.0, 5.0), WINDOW)
    assert window is not None and classify(window, Resources(cpus_per_task=2, gpus=1), ON) == "gpu_idle"
    assert classify(window, Resources(cpus_per_task=2, gpus=1, nodes=2), ON) is None
    assert classify(window, Resources(cpus_per_task=2, gpus=2, tasks_per_node=2), ON) is None
