"""What one task asks Slurm for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resources:
    partition: str | None = None
    gpus: int = 0
    gpu_type: str | None = None
    cpus_per_task: int = 1
    mem_mb: int = 1024
    time_min: int = 60
    cpu_bind: str | None = None
    gpu_bind: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    exclude: str | None = None

    @property
    def gres(self) -> str | None:
        """sbatch --gres value: gpu:<type>:<n> or gpu:<n>."""
        if not self.gpus:
            return None
        return f"gpu:{self.gpu_type}:{self.gpus}" if self.gpu_type else f"gpu:{self.gpus}"
