"""A site's limits on queued jobs, as Slurm states them and as its refusals name them.

Most sites cap what a user may have queued (`MaxSubmitJobs` on the association, `MaxSubmitPU` on
the QOS; every array element counts). sbatch is then refused, on 22.05 and 24.11 alike, with a
line naming the limit (`sbatch: error: AssocMaxSubmitJobLimit`) and then `Batch job submission
failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)`;
`sbatch --test-only` says `allocation failure: Job violates …` (tests/fixtures/slurm_limits/). The
generic text alone also covers a job larger or longer than a limit allows, which no wait cures: it
counts as a limit only while the user has jobs queued whose end makes room (`SubmitRoom`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property

ACCOUNTING_POLICY = "Job violates accounting/QOS policy"
# the reasons sbatch prints (22.05, 24.11) before the refusal when a limit on queued jobs was hit
SUBMIT_LIMIT_REASONS = ("AssocMaxSubmitJobLimit", "AssocGrpSubmitJobsLimit", "QOSMaxSubmitJobPerUserLimit",
                        "QOSMaxSubmitJobPerAccountLimit", "QOSGrpSubmitJobsLimit")
WAITING = "waiting for room: "  # how a waiting submission's note begins (store: last_error)


def names_submit_limit(stderr: str) -> bool:
    """Slurm's refusal names a limit on queued jobs (its reason line)."""
    return any(reason in stderr for reason in SUBMIT_LIMIT_REASONS)


def may_be_submit_limit(stderr: str) -> bool:
    """The refusal is a submit limit, or the accounting-policy text that may be one."""
    return names_submit_limit(stderr) or ACCOUNTING_POLICY in stderr


_COUNT = re.compile(r"[0-9]{1,18}")


def submit_limit(assoc_text: str, qos_text: str) -> int | None:
    """The smallest per-user limit on queued jobs from `sacctmgr -n -P show assoc … format=MaxSubmit`
    and `show qos … format=MaxSubmitPU` (one value per line, empty where none is set); None when
    neither sets one. Group limits (GrpSubmit) are shared with others: not a room one user can count."""
    # ASCII digits only, and a sane count of them: str.isdigit() also takes '²' or '٣', which
    # int() refuses, and int() refuses more than 4,300 digits (odd sacctmgr output crashed submit)
    values = [int(v) for v in (assoc_text + "\n" + qos_text).split() if _COUNT.fullmatch(v)]
    return min(values) if values else None


class SubmitRoom:
    """How many more array elements this user may queue now, over one tick's submissions: the
    limit read from Slurm (None when it cannot be read: learnt from the first refusal), minus
    what the user has queued. Pieces go out in order: once one waits (no room, or Slurm refused
    it for a limit), the rest of the tick's wait behind it.
    The queued count (an squeue) is asked only when a limit is known or a refusal needs it."""

    def __init__(self, limit: int | None, count_queued: Callable[[], int]) -> None:
        self.limit = limit
        self._count_queued = count_queued
        self.taken = 0
        self.refused = ""  # why the tick's pieces wait from here on, once one waited

    @cached_property
    def _listed(self) -> int:
        return self._count_queued()

    @property
    def queued(self) -> int:
        return self._listed + self.taken

    def why_not(self, size: int) -> str | None:
        """Why `size` more elements must wait now; None when they may be submitted."""
        if self.refused:
            return self.refused
        if self.limit is not None and self.queued + size > self.limit:
            self.refused = (f"site limit on queued jobs: {self.queued} of {self.limit} queued, "
                            f"{size} more would pass it")
            return self.refused
        return None

    def is_limit(self, stderr: str) -> bool:
        """A refusal that a later tick's room will cure: a named submit limit, or the generic
        accounting-policy text while jobs of this user are queued (their end makes room)."""
        return names_submit_limit(stderr) or (ACCOUNTING_POLICY in stderr and self.queued > 0)

    def took(self, size: int) -> None:
        self.taken += size

    def refuse(self, message: str) -> None:
        self.refused = f"Slurm refused a submission for a site limit ({self.queued} queued): {message}"
