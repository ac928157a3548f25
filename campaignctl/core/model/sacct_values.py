"""sacct's value columns read: a pending array's index list (JobID `12_[3-9%2]`), ExitCode and
DerivedExitCode as the shell's exit status, and MaxRSS as megabytes."""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache

CUT = "..."  # what Slurm's bit_fmt leaves where it cut a list at SLURM_BITSTR_LEN bytes
MAX_SIGNAL = 64  # SIGRTMAX on Linux; OUT_OF_MEMORY prints 0:125, which is no signal


def expand_index_range(text: str) -> tuple[int, ...]:
    """`3-9%2` → 3..9; `1,4-5` → 1,4,5; `0-10:2` → 0,2,…,10."""
    return _expand(p for p in text.split("%")[0].split(",") if p.strip())


def certain_indices(text: str) -> tuple[tuple[int, ...], bool]:
    """The indices a pending list names for sure, and whether it was cut. Seen on Slurm 22.05 after
    in-place updates split elements off (tests/fixtures/sacct/array_pending_truncated.txt):
    `0-4,6-11,…,46-49,51-...%1`, and `0-4,6-11,...,69-...%1`. A part holding `...` says nothing:
    `51-` may be 51 cut from 512, and what lies between the parts is unknown. Nothing is invented."""
    parts = [p for p in text.split("%")[0].split(",") if p.strip()]
    whole = [p for p in parts if CUT not in p]
    return _expand(whole), len(whole) != len(parts)


def _expand(parts: Iterable[str]) -> tuple[int, ...]:
    out: list[int] = []
    for part in parts:
        part = part.strip()
        bounds, _, step = part.partition(":")
        lo, _, hi = bounds.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1, int(step or 1)))
    return tuple(out)


@lru_cache(maxsize=1024)
def exit_pair(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    return (int(code) if code.isdigit() else None, int(sig) if sig.isdigit() else None)


@lru_cache(maxsize=1024)
def shell_exit(exit_text: str, derived_text: str = "", verbatim: bool = False) -> tuple[int | None, int | None]:
    """(exit code as a shell reports it, signal) of a job line, from ExitCode and DerivedExitCode.
    Recorded on the lab cluster (tests/fixtures/sacct/signal_*.txt, exit143_*.txt):
    batch shell killed by TERM `0:15`|`0:0` → 143; srun task killed by TERM `15:0`|`0:15` → 143
    (srun exits 128+15, printed as 15); task exited 143 (the job-side runner, its child killed by
    TERM) `15:0`|`143:0` → 143. A batch-only job that exited 143 reads `15:0`|`0:0`, the same as
    one that exited 15: nothing tells them apart, so it stays 15. OUT_OF_MEMORY's `0:125` is no
    signal: its code stays 0. `verbatim` (Slurm 25.11+): ExitCode's code is the status itself,
    `15:0` with DerivedExitCode `0:15` is exit 15, never 143."""
    code, sig = exit_pair(exit_text)
    if sig is not None and 0 < sig <= MAX_SIGNAL:
        return 128 + sig, sig
    if verbatim:
        return code, sig
    derived_code, derived_sig = exit_pair(derived_text)
    if code and derived_sig == code and code <= MAX_SIGNAL:
        return 128 + code, code
    if code and derived_code == code + 128:
        return derived_code, sig
    return code, sig


def runner_exit(code: int | None, returncode: int | None, verbatim: bool = False) -> int | None:
    """sacct's exit code of a FAILED job, corrected by what the job-side runner recorded itself
    (exit.json `returncode`: -N when its program was killed by signal N, like Popen). Slurm 22.05
    prints 143 as `15:0`, and DerivedExitCode, which says `143:0`, is sometimes `0:0` for good: seen
    on the lab for a program that killed itself with SIGTERM 0.13 s after it started (job 5537:
    job, .batch and .0 all `15:0`, derived `0:0`), the step's end racing the job's. So sacct's 15 is
    143 when the runner saw signal 15 or exit 143; any other pair stays as sacct says. Slurm 25.11
    prints 143 as 143 (`verbatim`): its 15 is 15."""
    if not verbatim and code is not None and 0 < code <= MAX_SIGNAL and returncode in (-code, 128 + code):
        return 128 + code
    return code


def rss_mb(text: str) -> float | None:
    """sacct MaxRSS (`123456K`) → megabytes; None for an empty or unreadable field (a job whose
    steps never reported one), never 0."""
    size = rss_bytes(text)
    return size / 1024 ** 2 if size else None


def rss_bytes(text: str) -> float:
    """`123456K` → bytes; sacct prints K/M/G/T suffixes (or none). 0 for what is no size: float()
    also reads `infK`, `nan` and `-5K`, which a right-sized request must never be made of."""
    if not text:
        return 0.0
    unit = " KMGT".find(text[-1])
    try:
        size = float(text[:-1]) * 1024 ** unit if unit > 0 else float(text)
    except ValueError:
        return 0.0
    return size if math.isfinite(size) and size > 0 else 0.0
