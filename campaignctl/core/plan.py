"""Tasks → Slurm array chunks.

MaxArraySize bounds the array *index* (0 … MaxArraySize-1), not the element count, so a chunk of
n tasks is submitted as `--array=0-(n-1)%throttle` and n ≤ MaxArraySize. Each chunk is one sbatch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ArrayChunk:
    task_indices: tuple[int, ...]  # array index i runs task task_indices[i]
    throttle: int | None

    @property
    def size(self) -> int:
        return len(self.task_indices)

    @property
    def array_spec(self) -> str:
        spec = f"0-{self.size - 1}"
        return f"{spec}%{self.throttle}" if self.throttle else spec


def plan_chunks(task_indices: Sequence[int], max_array_size: int,
                max_parallel: int | None) -> tuple[ArrayChunk, ...]:
    """Split tasks into arrays of at most `max_array_size` elements, each throttled to `max_parallel`."""
    if max_array_size < 1:
        raise ValueError(f"max_array_size must be positive, got {max_array_size}")
    chunks = []
    for start in range(0, len(task_indices), max_array_size):
        part = tuple(task_indices[start:start + max_array_size])
        throttle = min(max_parallel, len(part)) if max_parallel else None
        chunks.append(ArrayChunk(task_indices=part, throttle=throttle))
    return tuple(chunks)
