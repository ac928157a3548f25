"""The output matcher, table-tested on real recorded texts (tests/fixtures/output/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.policy.output_causes import (
    COLLECTIVE_TIMEOUT,
    GPU_HARDWARE,
    GPU_OOM,
    check_pattern,
    match_output,
    site_signatures,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "output"
NCCL = site_signatures([("nccl_timeout", "Watchdog caught collective operation timeout")])

CASES = [
    ("torch24_cuda_oom_then_second_exception.txt", GPU_OOM, "torch.OutOfMemoryError: CUDA out of memory"),
    ("torch21_cuda_oom.txt", GPU_OOM, "torch.cuda.OutOfMemoryError: CUDA out of memory"),
    ("torch23_cuda_oom.txt", GPU_OOM, "Tried to allocate 22.00 MiB"),
    ("torch1x_runtimeerror_cuda_oom.txt", GPU_OOM, "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB"),
    ("torch1x_cached_cuda_oom.txt", GPU_OOM, "4.68 MiB cached"),
    ("cuda_error_out_of_memory.txt", GPU_OOM, "RuntimeError: CUDA error: out of memory"),
    ("torch28_accelerator_error_oom.txt", GPU_OOM, "torch.AcceleratorError: CUDA error: out of memory"),
    ("rocm_hip_oom.txt", GPU_OOM, "HIP out of memory"),
    ("cublas_alloc_failed.txt", GPU_OOM, "CUBLAS_STATUS_ALLOC_FAILED"),
    ("cudnn_alloc_failed.txt", GPU_OOM, "CUDNN_STATUS_ALLOC_FAILED"),
    ("jax_resource_exhausted.txt", GPU_OOM, "RESOURCE_EXHAUSTED: Out of memory while trying to allocate"),
    ("tf_oom_when_allocating.txt", GPU_OOM, "OOM when allocating tensor with shape[16,112,112,147]"),
    ("nccl_watchdog_timeout.txt", "nccl_timeout", "WorkNCCL(SeqNum=808, OpType=ALLREDUCE"),
    ("rank_oom_then_nccl_watchdog.txt", GPU_OOM, "Tried to allocate 22.00 MiB"),
    ("gloo_collective_timeout.txt", COLLECTIVE_TIMEOUT, "Timed out waiting 5000ms for recv operation to complete"),
    ("torch_uncorrectable_ecc.txt", GPU_HARDWARE, "RuntimeError: CUDA error: uncorrectable ECC error encountered"),
    ("tf_ecc_uncorrectable.txt", GPU_HARDWARE, "CUDA_ERROR_ECC_UNCORRECTABLE"),
    ("xid_fallen_off_bus.txt", GPU_HARDWARE, "NVRM: Xid (PCI:0000:3b:00): 79"),
    ("negative_training_log.txt", None, ""),
    ("negative_python_bug.txt", None, ""),
]


@pytest.mark.parametrize(("name", "cause", "quoted"), CASES, ids=[c[0] for c in CASES])
def test_recorded_output_names_its_cause(name: str, cause: str | None, quoted: str) -> None:
    match = match_output((FIXTURES / name).read_text(), NCCL)
    assert (match.cause if match else None) == cause
    if match is not None:
        assert quoted in match.evidence


def test_every_fixture_is_in_the_table_and_the_sources() -> None:
    files = {p.name for p in FIXTURES.glob("*.txt")}
    assert files == {c[0] for c in CASES}
    sources = (FIXTURES / "SOURCES.md").read_text()
    assert all(f"| {name} |" in sources for name in files)


def test_without_the_site_pattern_an_nccl_timeout_is_the_builtin_collective_timeout() -> None:
    match = match_output((FIXTURES / "nccl_watchdog_timeout.txt").read_text())
    assert match is not None and match.cause == COLLECTIVE_TIMEOUT
    assert match.evidence.startswith("[NCCL watchdog] [rank1]")


def test_a_site_pattern_wins_over_a_builtin_on_the_same_line() -> None:
    site = site_signatures([("oom_in_eval", r"eval.*CUDA out of memory")])
    match = match_output("eval step: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB", site)
    assert match is not None and match.cause == "oom_in_eval"


def test_evidence_is_bounded() -> None:
    match = match_output("RuntimeError: CUDA error: out of memory " + "x" * 10_000)
    assert match is not None and len(match.evidence.encode()) <= 4096


@pytest.mark.parametrize(("pattern", "problem"), [
    ("Watchdog caught collective operation timeout", ""),
    ("(unclosed", "is not a regular expression"),
    ("x*", "matches an empty line"),
])
def test_check_pattern(pattern: str, problem: str) -> None:
    assert problem in check_pattern(pattern) and bool(problem) == bool(check_pattern(pattern))
