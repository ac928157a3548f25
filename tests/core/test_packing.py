"""`pack: auto` (core/packing/packing.py): tasks per GPU from measured use, bound by GPU memory, GPU
compute or the spec, and no packing on too little evidence."""

from __future__ import annotations

from dataclasses import replace

from campaignctl.core.packing.packing import (
    MIN_SAMPLES,
    Measured,
    choose_per_gpu,
    choose_shape,
    measured,
    pack_decision,
)
from campaignctl.core.resources import Resources
from campaignctl.core.spec.pack_spec import PackSpec
from campaignctl.core.tick.right_size import UsageSample


def sample(gpu_mem_mb: float | None, state: str = "COMPLETED", util: float = 15, cpu: float = 30) -> UsageSample:
    return UsageSample("c", "rung 0", state, 900.0, 60, Resources(gpus=1), gpu_mem_mb=gpu_mem_mb, cpu_pct=cpu,
                       gpu_mem_total_mb=40_960, gpu_util_pct=util)


def test_a_quarter_of_the_gpu_s_memory_packs_three_with_headroom() -> None:
    """A toy trainer holding ~10 GB of a 40 GB A100, 15 % busy: memory binds (32 GB usable / 10)."""
    m = measured([sample(9800, util=14), sample(10_000), sample(10_240, util=16), sample(None, "OUT_OF_MEMORY")])
    assert m.samples == 3 and round(m.gpu_util_mean_pct or 0) == 15
    packing = choose_per_gpu(m, allowed=8)
    assert packing.per_gpu == 3 and "bound by GPU memory" in packing.why
    assert packing.evidence["by_compute"] == 5


def test_compute_binds_when_the_tasks_are_busy_and_the_spec_caps_it() -> None:
    m = Measured(10, 2000, 40_960, 30)
    assert choose_per_gpu(m, allowed=8).per_gpu == 2  # 80 % / 30 %
    assert "bound by GPU compute" in choose_per_gpu(m, allowed=8).why
    small = Measured(10, 500, 40_960, 5)
    assert choose_per_gpu(small, allowed=4).per_gpu == 4
    assert "bound by the spec" in choose_per_gpu(small, allowed=4).why


def test_too_little_evidence_or_a_task_larger_than_the_headroom_is_not_packed() -> None:
    assert choose_per_gpu(Measured(MIN_SAMPLES - 1, 1000, 40_960, 10), allowed=8).per_gpu == 1
    assert choose_per_gpu(Measured(10, None, 40_960, 10), allowed=8).per_gpu == 1
    assert choose_per_gpu(Measured(10, 39_000, 40_960, 10), allowed=8).per_gpu == 1  # over 80 %: alone
    assert choose_per_gpu(Measured(10, 1000, 40_960, 10), allowed=1).why == "the spec allows one task per GPU"


def test_auto_packs_as_many_as_memory_allows_on_the_cpus_the_tasks_were_seen_using() -> None:
    each = Resources(gpus=1, cpus_per_task=1, mem_mb=500)
    choice = choose_shape(PackSpec(per_gpu=8, auto=True), each, [sample(10_000, cpu=30)] * 4)
    assert choice.shape is not None and (choice.shape.per_element, choice.shape.per_gpu) == (3, 3)
    assert choice.shape.cpus == 2  # 3 × 30 % of a CPU, with 20 % kept free → 1.1, rounded up
    assert "bound by GPU memory" in choice.why
    decision = pack_decision("tok", [4, 5, 6], "rung 0", choice)
    assert (decision.action, decision.attempt_token, decision.typed) == ("pack", "tok.0", decision.typed)
    assert decision.params["per_gpu"] == 3 and decision.inputs["samples"] == 4


def test_auto_without_evidence_is_not_packed_and_a_fixed_pack_is_the_spec_s() -> None:
    each = Resources(gpus=1, cpus_per_task=1, mem_mb=500)
    assert choose_shape(PackSpec(per_gpu=8, auto=True), each, [sample(10_000)]).shape is None
    fixed = choose_shape(PackSpec(per_gpu=4), each, [])
    assert fixed.shape is not None and (fixed.shape.per_element, fixed.shape.cpus) == (4, 0)


def runs(*elapsed: int, gpus: int = 1) -> list[UsageSample]:
    return [UsageSample("c", "rung 0", "COMPLETED", 50.0, e, Resources(gpus=gpus), gpu_mem_mb=10_000 if gpus else None,
                        gpu_mem_total_mb=40_960 if gpus else None, gpu_util_pct=15 if gpus else None, cpu_pct=90)
            for e in elapsed]


def test_auto_runs_short_tasks_as_plain_processes_sized_to_half_an_hour_a_job() -> None:
    each = Resources(gpus=1, mem_mb=500, time_min=2)
    gpu = choose_shape(PackSpec(per_gpu=8, auto=True), each, runs(8, 10, 12, 20))
    assert gpu.shape is not None and (gpu.shape.processes, gpu.shape.per_gpu) == (3, 3)  # as memory allows
    assert gpu.shape.per_element == 3 * 15  # three at a time, 15 rounds of their 2-min limit: 30 min
    assert "15 rounds of 2 min to a job" in gpu.why
    assert "median run 10 s (p95 20 s) over 4 completed attempts" in gpu.why and "plain processes" in gpu.why
    cpu = choose_shape(PackSpec(auto=True, cpus=8), Resources(cpus_per_task=2, mem_mb=200, time_min=1),
                       runs(1, 1, 2, gpus=0))
    assert cpu.shape is not None and (cpu.shape.processes, cpu.shape.per_element, cpu.shape.cpus) == (4, 120, 8)
    assert "4 at a time on 8 CPUs" in cpu.why
    long_limit = choose_shape(PackSpec(auto=True, cpus=8), Resources(cpus_per_task=2, time_min=60),
                              runs(1, 1, 2, gpus=0))
    assert long_limit.shape is not None and long_limit.shape.per_element == 4  # one round of an hour


def test_auto_leaves_long_or_unmeasured_cpu_tasks_unpacked_and_says_why() -> None:
    each = Resources(cpus_per_task=1, mem_mb=200)
    long = choose_shape(PackSpec(auto=True), each, runs(300, 400, 500, gpus=0))
    assert long.shape is None and "only when they are short" in long.why
    assert choose_shape(PackSpec(auto=True), each, runs(5, 5, gpus=0)).shape is None  # two: too few


def test_auto_never_puts_two_io_bound_tasks_side_by_side_and_says_so() -> None:
    """Most of the group's labelled completed attempts were I/O-bound: not packed on a GPU nor as
    a job's steps, and short ones run one at a time; a minority of I/O-bound ones changes nothing."""
    each = Resources(gpus=1, cpus_per_task=1, mem_mb=500)
    streaming = [replace(sample(10_000), bottleneck="io")] * 3 + [replace(sample(10_000), bottleneck="compute")]
    apart = choose_shape(PackSpec(per_gpu=8, auto=True), each, streaming)
    assert apart.shape is None and "3 of 4 measured attempts of the group were I/O-bound" in apart.why
    assert apart.evidence == {"io_bound": 3, "labelled": 4}
    assert choose_shape(PackSpec(per_gpu=8, per_job=4, auto=True), each, streaming).shape is None
    short = [replace(r, bottleneck="io") for r in runs(1, 1, 2, gpus=0)]
    cpu = choose_shape(PackSpec(auto=True, cpus=8), Resources(cpus_per_task=2, mem_mb=200, time_min=1), short)
    assert cpu.shape is not None and cpu.shape.processes == 1 and "1 at a time" in cpu.why and "I/O-bound" in cpu.why
    mixed = [replace(sample(10_000), bottleneck=b) for b in ("io", "compute", "compute", None)]
    packed = choose_shape(PackSpec(per_gpu=8, auto=True), each, mixed)
    assert packed.shape is not None and packed.shape.per_gpu == 3
