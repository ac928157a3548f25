"""Packs (core/pack_plan.py): what an element of packed tasks asks for, and which of its GPUs
each task runs on."""

from __future__ import annotations

from campaignctl.core.pack_plan import PackShape, misfit, plan_packs, step_argv, visible_gpu
from campaignctl.core.resources import Resources
from campaignctl.core.tick.siblings import NodeShape

EACH = Resources(gpus=1, cpus_per_task=2, mem_mb=4000, time_min=30)


def test_four_per_gpu_share_one_gpu_and_add_up_cpus_and_memory() -> None:
    packs = plan_packs(list(range(10)), EACH, PackShape(4, per_gpu=4))
    assert [p.tasks for p in packs] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]
    first, last = packs[0], packs[-1]
    assert (first.allocation.gpus, first.allocation.cpus_per_task, first.allocation.mem_mb) == (1, 8, 16_000)
    assert first.allocation.time_min == 30 and first.gpu_of == (0, 0, 0, 0) and first.share == 0.25
    # an array's elements ask alike: the last, smaller pack holds what the others do, shared by two
    assert (last.allocation.gpus, last.allocation.mem_mb, last.gpu_of, last.share) == (1, 16_000, (0, 0), 0.5)


def test_a_measured_shape_asks_fewer_cpus_than_one_per_task() -> None:
    [pack] = plan_packs([0, 1, 2, 3], EACH, PackShape(4, per_gpu=4, cpus=2))
    assert pack.allocation.cpus_per_task == 2 and pack.step.cpus_per_task == 2


def test_per_job_with_per_gpu_spreads_tasks_over_the_pack_s_gpus() -> None:
    [pack] = plan_packs([0, 1, 2, 3, 4, 5], EACH, PackShape(6, per_gpu=2))
    assert pack.allocation.gpus == 3 and pack.gpu_of == (0, 0, 1, 1, 2, 2)


def test_per_job_alone_gives_each_task_its_own_gpus_or_none() -> None:
    [pack] = plan_packs([0, 1, 2], Resources(gpus=2, mem_mb=1000), PackShape(3))
    assert pack.allocation.gpus == 6 and pack.gpu_of == (0, 2, 4)
    assert visible_gpu("4,5,6,7,8,9", pack.gpu_of[1], 2) == "6,7"
    [cpu] = plan_packs([0, 1], Resources(cpus_per_task=4, mem_mb=500), PackShape(2))
    assert (cpu.allocation.gpus, cpu.allocation.cpus_per_task, cpu.gpu_of) == (0, 8, ())


def test_plain_processes_ask_for_those_at_once_and_the_rounds_of_time() -> None:
    [pack] = plan_packs(list(range(10)), EACH, PackShape(10, processes=4))
    assert pack.processes == 4 and pack.gpu_of == (0, 1, 2, 3)  # by slot, not by task
    whole = pack.allocation
    assert (whole.gpus, whole.cpus_per_task, whole.mem_mb, whole.time_min) == (4, 8, 16_000, 30 * 3)
    [cpu] = plan_packs(list(range(500)), Resources(mem_mb=200, time_min=1), PackShape(500, cpus=4, processes=8))
    assert (cpu.allocation.cpus_per_task, cpu.allocation.mem_mb, cpu.allocation.time_min) == (4, 1600, 63)


def test_a_shape_survives_the_submission_row_and_a_step_is_named_by_its_token() -> None:
    shape = PackShape(4, per_gpu=4, cpus=2)
    assert PackShape.from_json(shape.to_json()) == shape and PackShape.from_json("") is None
    assert '"processes"' not in shape.to_json()  # a row written before plain processes reads the same
    inline = PackShape(500, cpus=4, processes=8)
    assert PackShape.from_json(inline.to_json()) == inline
    argv = step_argv("abc.3", EACH, ["python", "-m", "x"])
    assert argv[:2] == ["srun", "--overlap"] and "--job-name=abc.3" in argv and "--mem=4000M" in argv
    assert visible_gpu("2", 0) == "2" and visible_gpu(None, 0) is None and visible_gpu("0", 1) is None


def test_a_step_overrides_the_binding_its_element_exported() -> None:
    # srun reads SLURM_CPU_BIND (the element's step exports its own mask) unless --cpu-bind says
    # otherwise: an explicit none, before the command, so the command's own arguments stay its own
    argv = step_argv("abc.3", EACH, ["python", "--cpu-bind=cores"])
    assert argv.index("--cpu-bind=none") < argv.index("python") and argv[-1] == "--cpu-bind=cores"


def test_a_pack_no_node_can_hold_says_which_number_and_what_to_change() -> None:
    small = [NodeShape(2, 4000, 2), NodeShape(2, 4000, 0)]  # the lab's nodes: 2 CPUs each
    each = Resources(gpus=1, cpus_per_task=1, mem_mb=300)
    why = misfit(each, PackShape(4, per_gpu=4), small)
    assert why == ("each job of the pack (4 tasks) asks 4 CPUs (4 tasks × cpus_per_task 1) where the largest "
                   "node has 2: set pack.cpus to at most 2 (the tasks' steps share them); or pack fewer tasks to a job")
    assert misfit(each, PackShape(4, per_gpu=4, cpus=2), small) is None  # the spec reference's own shape
    assert misfit(each, PackShape(2, per_gpu=2), small) is None
    assert "asks 3 CPUs (pack.cpus 3)" in (misfit(each, PackShape(4, per_gpu=4, cpus=3), small) or "")
    heavy = misfit(Resources(cpus_per_task=1, mem_mb=3000), PackShape(2), small)
    assert heavy is not None and "6000M of memory (2 tasks × 3000M) where the largest node has 4000M" in heavy
    assert misfit(each, PackShape(8, per_gpu=4), []) is None  # sinfo listed nothing: Slurm will say
