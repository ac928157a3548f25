"""Tasks → Slurm array chunks.

MaxArraySize bounds the array *index* (0 … MaxArraySize-1), not the element count, so a chunk of
n tasks is submitted as `--array=0-(n-1)%throttle` and n ≤ MaxArraySize. Each chunk is one sbatch.
A packed chunk runs `pack.per_element` tasks in each element (core/pack_plan.py): element e runs
tasks e·K … e·K+K-1 of the chunk's list.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from campaignctl.core.pack_plan import PackShape

DEFAULT_MAX_ARRAY_SIZE = 1001  # slurm.conf(5): MaxArraySize default


@dataclass(frozen=True, slots=True)
class ArrayChunk:
    task_indices: tuple[int, ...]  # array index i runs task task_indices[i]
    throttle: int | None
    pack: PackShape | None = None

    @property
    def size(self) -> int:
        return len(self.task_indices)

    @property
    def elements(self) -> int:
        """The array's elements: its tasks, or its packs."""
        return math.ceil(self.size / self.pack.per_element) if self.pack else self.size

    def element_of(self, position: int) -> int:
        """The array index that runs the chunk's `position`-th task."""
        return position // self.pack.per_element if self.pack else position

    @property
    def array_spec(self) -> str:
        spec = f"0-{self.elements - 1}"
        return f"{spec}%{self.throttle}" if self.throttle else spec


def plan_chunks(task_indices: Sequence[int], max_array_size: int,
                max_parallel: int | None, pack: PackShape | None = None) -> tuple[ArrayChunk, ...]:
    """Split tasks into arrays of at most `max_array_size` elements, each throttled to
    `max_parallel` elements; packed, each element runs `pack.per_element` tasks."""
    if max_array_size < 1:
        raise ValueError(f"max_array_size must be positive, got {max_array_size}")
    chunks = []
    per_array = max_array_size * (pack.per_element if pack else 1)
    for start in range(0, len(task_indices), per_array):
        part = tuple(task_indices[start:start + per_array])
        chunk = ArrayChunk(task_indices=part, throttle=None, pack=pack)
        throttle = min(max_parallel, chunk.elements) if max_parallel else None
        chunks.append(ArrayChunk(task_indices=part, throttle=throttle, pack=pack))
    return tuple(chunks)
