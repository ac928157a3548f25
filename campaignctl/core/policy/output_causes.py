"""Causes Slurm cannot see: named from the tail of a failed program's output. Pure.

A GPU running out of memory ends the program with a traceback and exit 1; sacct shows
`FAILED 1:0`, the same as any bug. The job-side runner matches these signatures on the last
64 KiB of the attempt's output.log (never the whole file) and writes the cause into exit.json.

The FIRST matching line of the tail wins. In a multi-rank task one rank's OOM is followed, in
the same output, by the other ranks' NCCL watchdog timeouts and teardown errors (see
tests/fixtures/output/rank_oom_then_nccl_watchdog.txt): the earliest signature is the failure,
later ones its consequences. Signatures are anchored on the exception line a traceback prints
(`…OutOfMemoryError: CUDA out of memory`, not the bare words), so a log line that mentions
memory, or a framework's "recovered from OOM" warning, does not match.

Every text below was recorded from a real report: tests/fixtures/output/SOURCES.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

GPU_OOM = "gpu_out_of_memory"
COLLECTIVE_TIMEOUT = "collective_timeout"  # a rank waited too long for its peers (core/policy/suspects.py)
SETUP_FAILED = "setup_failed"  # written by the runner when a `setup:` line fails (not matched here)
LAUNCH_FAILED = "launch_failed"  # written by a pack's runner when a task's srun step never started
GPU_HARDWARE = "gpu_hardware"  # the GPU itself failed (uncorrectable ECC, an Xid, off the bus): the node's doing
BUILTIN_CAUSES = (GPU_OOM, COLLECTIVE_TIMEOUT, SETUP_FAILED, LAUNCH_FAILED, GPU_HARDWARE)
TAIL_BYTES = 64 * 1024
EVIDENCE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Signature:
    cause: str
    label: str  # what printed it, for the evidence
    pattern: re.Pattern[str]


def _sig(label: str, regex: str, cause: str = GPU_OOM) -> Signature:
    return Signature(cause, label, re.compile(regex))


BUILTIN_SIGNATURES = (
    # torch.OutOfMemoryError (2.4+), torch.cuda.OutOfMemoryError (2.0-2.3), OutOfMemoryError in
    # notebooks; ROCm builds print HIP instead of CUDA
    _sig("PyTorch OutOfMemoryError", r"OutOfMemoryError: (?:CUDA|HIP) out of memory"),
    # PyTorch 1.x: RuntimeError: CUDA out of memory. Tried to allocate … (GPU 0; 15.90 GiB total capacity; …)
    _sig("PyTorch RuntimeError (1.x)", r"RuntimeError: (?:CUDA|HIP) out of memory"),
    # cudaErrorMemoryAllocation surfaced by a CUDA call: RuntimeError or torch.AcceleratorError (2.8+)
    _sig("CUDA error: out of memory", r"(?:Error|error): CUDA error: out of memory"),
    _sig("cuBLAS allocation", r"CUBLAS_STATUS_ALLOC_FAILED"),
    _sig("cuDNN allocation", r"CUDNN_STATUS_ALLOC_FAILED"),
    # jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes.
    _sig("JAX/XLA RESOURCE_EXHAUSTED", r"RESOURCE_EXHAUSTED: Out of memory"),
    # TensorFlow: ResourceExhaustedError … OOM when allocating tensor with shape[…] … by allocator GPU_0_bfc
    _sig("TensorFlow ResourceExhaustedError", r"OOM when allocating tensor"),
    # ProcessGroupNCCL.cpp's watchdog: `[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(…)`
    _sig("NCCL watchdog", r"Watchdog caught collective operation timeout", COLLECTIVE_TIMEOUT),
    # Gloo (gloo/transport/tcp/unbound_buffer.cc, pair.cc), raised by ProcessGroupGloo: `RuntimeError:
    # [.../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation to complete`
    _sig("Gloo timeout", r"gloo/transport/\S+\] Timed out waiting \d+ms for (?:recv|send) operation",
         COLLECTIVE_TIMEOUT),
    # cudaErrorECCUncorrectable (214) as PyTorch raises it (`RuntimeError: CUDA error: uncorrectable
    # ECC error encountered`), TensorFlow's driver-API name, and PyTorch 1.x's THC wording
    _sig("uncorrectable ECC error", r"(?:CUDA error|CUDA_ERROR_ECC_UNCORRECTABLE|cuda runtime error \(\d+\))"
         r": uncorrectable ECC error encountered", GPU_HARDWARE),
    # the kernel driver's Xid report (`NVRM: Xid (PCI:0000:3b:00): 79, pid=…, GPU has fallen off the
    # bus.`), where a site's prolog/epilog or the program copies the kernel log into the output
    _sig("NVIDIA Xid", r"NVRM: Xid \(PCI:[0-9A-Fa-f:.]+\): \d+", GPU_HARDWARE),
)


@dataclass(frozen=True, slots=True)
class Match:
    cause: str
    evidence: str  # the matching line and the one after it, at most EVIDENCE_BYTES


def site_signatures(causes: Sequence[tuple[str, str]]) -> tuple[Signature, ...]:
    """A policy's `causes: {name: {pattern: …}}` as signatures (patterns were checked at load)."""
    return tuple(Signature(name, "site pattern", re.compile(pattern)) for name, pattern in causes)


def match_output(tail: str, site: Sequence[Signature] = ()) -> Match | None:
    """The first line of `tail` that a signature matches; a site's own signatures are tried
    before the built-in ones on each line (a site names its failures more precisely)."""
    signatures = (*site, *BUILTIN_SIGNATURES)
    lines = tail.splitlines()
    for i, line in enumerate(lines):
        for sig in signatures:
            if sig.pattern.search(line):
                return Match(sig.cause, _evidence(sig, lines[i:i + 2]))
    return None


def _evidence(sig: Signature, lines: list[str]) -> str:
    text = f"[{sig.label}] " + "\n".join(line.rstrip() for line in lines if line.strip())
    data = text.encode()
    return text if len(data) <= EVIDENCE_BYTES else data[:EVIDENCE_BYTES - 3].decode(errors="ignore") + "..."


def check_pattern(pattern: str) -> str:
    """'' when `pattern` is a usable regular expression, else what is wrong with it."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return f"is not a regular expression: {exc}"
    if compiled.search(""):
        return "matches an empty line, so it would match every failed program"
    return ""
