"""`pack: auto` (core/packing.py): tasks per GPU from measured use, bound by GPU memory, GPU
compute or the spec, and no packing on too little evidence."""

from __future__ import annotations

from campaignctl.core.packing import MIN_SAMPLES, Measured, choose_per_gpu, measured
from campaignctl.core.resources import Resources
from campaignctl.core.right_size import UsageSample


def sample(gpu_mem_mb: float | None, state: str = "COMPLETED") -> UsageSample:
    return UsageSample("c", "rung 0", state, 900.0, 60, Resources(gpus=1), gpu_mem_mb=gpu_mem_mb)


def test_a_quarter_of_the_gpu_s_memory_packs_three_with_headroom() -> None:
    """A toy trainer holding ~10 GB of a 40 GB A100, 15 % busy: memory binds (32 GB usable / 10)."""
    m = measured([sample(9800), sample(10_000), sample(10_240), sample(None, "OUT_OF_MEMORY")], 40_960, [15, 14, 16])
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
