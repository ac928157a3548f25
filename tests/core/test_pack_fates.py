"""A packed task's fate from its own step (core/packing/pack_fates.py), read from the lab's real
recording of a pack (tests/fixtures/sacct/pack_oom_step.txt): one step of four ran out of memory,
its neighbours and the element completed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from campaignctl.core.model.records import HistoryRow
from campaignctl.core.model.slurm_states import State
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing.pack_fates import packed_observation, packed_observations, requested_share, share_of_tres
from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.resources import Resources
from campaignctl.core.slurm.sacct import observe_jobs
from campaignctl.core.usage.cost import UsageGroup, campaign_spend

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sacct" / "pack_oom_step.txt"
TOKENS = [f"7fb17c3a6939.{i}" for i in range(5)]


def row(position: int) -> HistoryRow:
    element = position // 4
    return HistoryRow(position, position, 1, element, TOKENS[position], f"13359_{element}", "RUNNING", "RUNNING",
                      None, "node1", None, "", None, None, "{}", "7fb17c3a6939", "released", "2026-11-28T04:33:00")


def test_each_packed_task_reads_its_own_step_at_its_share_of_the_element() -> None:
    observed = observe_jobs(FIXTURE.read_text(), step_tokens=set(TOKENS))
    assert observed[("13359", 0)].state is State.COMPLETED  # the element: its pack runner exited 0
    assert set(observed.steps) == set(TOKENS)
    fates = packed_observations([row(i) for i in range(5)], observed,
                                {"7fb17c3a6939": (PackShape(4, per_gpu=4, cpus=1), 5)})
    assert {t[-1]: (o.state, o.exit_code) for t, o in fates.items()} == {
        "0": (State.COMPLETED, 0), "1": (State.COMPLETED, 0), "2": (State.COMPLETED, 0),
        "3": (State.OUT_OF_MEMORY, 0), "4": (State.COMPLETED, 0)}
    oom, done, alone = fates[TOKENS[3]], fates[TOKENS[0]], fates[TOKENS[4]]
    assert (oom.elapsed_s, done.elapsed_s, done.max_rss) == (1, 7, "17504K")
    assert done.alloc_tres == "billing=0.25,cpu=0.25,gres/gpu:a100=0.25,gres/gpu=0.25,mem=300M,node=0.25"
    assert alone.alloc_tres == "billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1200M,node=1"  # the last pack's one


def test_the_element_s_fate_is_the_task_s_before_its_step_and_when_the_element_ended_it() -> None:
    observed = observe_jobs(FIXTURE.read_text(), step_tokens=set(TOKENS))
    element, step = observed[("13359", 0)], observed.steps[TOKENS[0]]
    pending = replace(element, state=State.PENDING, alloc_tres="")
    assert packed_observation(pending, None, 4).state is State.PENDING
    timed_out = replace(element, state=State.TIMEOUT)
    assert packed_observation(timed_out, replace(step, state=State.CANCELLED), 4).state is State.TIMEOUT
    assert packed_observation(timed_out, step, 4).state is State.COMPLETED  # it finished before the limit
    never_ran = packed_observation(element, None, 4)  # the element completed with no step of this task
    assert (never_ran.state, never_ran.exit_code) == (State.FAILED, None)


def test_a_step_srun_refused_in_a_completed_element_is_a_launch_failure_not_a_person_s_cancel() -> None:
    # the lab's recording: step `badbind` CANCELLED 0:64 after 0 s, steps `bigmem` and `bigcpu` never created
    observed = observe_jobs((FIXTURE.parent / "step_launch_refused.txt").read_text(),
                            step_tokens={"ok", "badbind", "bigmem", "bigcpu"})
    element = observed[("4765", None)]
    assert element.state is State.COMPLETED and set(observed.steps) == {"ok", "badbind"}
    refused = packed_observation(element, observed.steps["badbind"], 4)
    assert (refused.state, refused.slurm_state, refused.elapsed_s) == (State.FAILED, "CANCELLED", 0)
    assert packed_observation(element, observed.steps.get("bigmem"), 4).state is State.FAILED
    assert packed_observation(element, observed.steps["ok"], 4).state is State.COMPLETED
    # a step cancelled after it ran (early stopping's `scancel <element>.<step>`) stays cancelled
    stopped = packed_observation(element, replace(observed.steps["badbind"], elapsed_s=40), 4)
    assert stopped.state is State.CANCELLED


def test_shares_divide_counts_and_memory_and_leave_odd_fields_alone() -> None:
    assert share_of_tres("cpu=2,gres/gpu=1,mem=1200M", 4) == "cpu=0.5,gres/gpu=0.25,mem=300M"
    assert share_of_tres("cpu=2,mem=1G,weird", 2) == "cpu=1,mem=512M,weird"
    assert share_of_tres("", 4) == "" and share_of_tres("cpu=2", 1) == "cpu=2"


def test_a_pending_packed_task_is_projected_at_its_share_of_what_its_pack_asks() -> None:
    each = Resources(gpus=1, cpus_per_task=1, mem_mb=300, time_min=60)
    share = requested_share(each, PackShape(4, per_gpu=4, cpus=1), 4)
    assert share == "cpu=0.25,gres/gpu=0.25,mem=300M,node=0.25"
    spend = campaign_spend([UsageGroup("pending", each, share, 4, 0)], Prices())
    assert spend.projected.gpu_hours == 1.0  # four tasks of one hour sharing one GPU: one GPU-hour, not four
