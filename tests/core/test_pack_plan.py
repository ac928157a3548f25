"""Packs (core/pack_plan.py): what an allocation of packed tasks asks for, and which of its GPUs
each task runs on."""

from __future__ import annotations

from campaignctl.core.pack_plan import pack_size, plan_packs
from campaignctl.core.resources import Resources

EACH = Resources(gpus=1, cpus_per_task=2, mem_mb=4000, time_min=30)


def test_four_per_gpu_share_one_gpu_and_add_up_cpus_and_memory() -> None:
    packs = plan_packs(list(range(10)), EACH, per_gpu=4, per_job=1)
    assert [p.tasks for p in packs] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]
    first, last = packs[0], packs[-1]
    assert (first.allocation.gpus, first.allocation.cpus_per_task, first.allocation.mem_mb) == (1, 8, 16_000)
    assert first.allocation.time_min == 30 and first.gpu_of == (0, 0, 0, 0) and first.share == 0.25
    assert (last.allocation.gpus, last.allocation.mem_mb, last.gpu_of) == (1, 8000, (0, 0))


def test_per_job_with_per_gpu_spreads_tasks_over_the_pack_s_gpus() -> None:
    [pack] = plan_packs([0, 1, 2, 3, 4, 5], EACH, per_gpu=2, per_job=6)
    assert pack.allocation.gpus == 3 and pack.gpu_of == (0, 0, 1, 1, 2, 2)


def test_per_job_alone_gives_each_task_its_own_gpus_or_none() -> None:
    [pack] = plan_packs([0, 1, 2], Resources(gpus=2, mem_mb=1000), per_gpu=1, per_job=3)
    assert pack.allocation.gpus == 6 and pack.gpu_of == (0, 2, 4)
    [cpu] = plan_packs([0, 1], Resources(cpus_per_task=4, mem_mb=500), per_gpu=1, per_job=2)
    assert (cpu.allocation.gpus, cpu.allocation.cpus_per_task, cpu.gpu_of) == (0, 8, ())
    assert pack_size(per_gpu=4, per_job=1) == 4 and pack_size(per_gpu=4, per_job=8) == 8
