"""The tick's one squeue: asked at most once, and only if something needs it."""

from __future__ import annotations

from campaignctl.adapters import slurm


class SqueueOnce:
    """squeue at most once per tick, and only if someone asks. `clusters`: the other clusters the
    tick's attempts run on (their job ids' qualifiers): then one `squeue -M` over them and the
    default cluster, which also says which of them answered."""

    def __init__(self) -> None:
        self._jobs: list[slurm.QueuedJob] | None = None
        self.clusters: list[str] = []
        self.answered: frozenset[str] | None = None

    def jobs(self) -> list[slurm.QueuedJob]:
        if self._jobs is None:
            if self.clusters:
                self._jobs, self.answered = slurm.queued_on(sorted({*self.clusters, slurm.cluster_name()}))
            else:
                self._jobs = slurm.own_queued_jobs()
        return self._jobs

    def arrays(self) -> set[str]:
        return {j.array_job_id for j in self.jobs()}

    def unheard(self) -> frozenset[str]:
        """The clusters asked this tick whose squeue did not answer (their slurmctld is down)."""
        if self.answered is None:
            return frozenset()
        return frozenset({*self.clusters, slurm.cluster_name()}) - self.answered

    def seen(self) -> list[slurm.QueuedJob] | None:
        """What squeue said this tick, if it was asked (never asks)."""
        return self._jobs
