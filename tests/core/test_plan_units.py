from __future__ import annotations

import math

import pytest

from campaignctl.core.base.units import parse_duration_seconds, parse_mem_mb, parse_time_minutes
from campaignctl.core.slurm.plan import plan_chunks


@pytest.mark.parametrize(("tasks", "max_array", "max_parallel"), [
    (2500, 1001, 8), (2500, 100, None), (1001, 1001, 3), (1, 1001, 8), (7, 3, 2)])
def test_chunks_cover_every_task_once_within_max_array_size(tasks: int, max_array: int,
                                                           max_parallel: int | None) -> None:
    chunks = plan_chunks(list(range(tasks)), max_array, max_parallel)
    assert len(chunks) == math.ceil(tasks / max_array)
    assert [t for c in chunks for t in c.task_indices] == list(range(tasks))
    for chunk in chunks:
        assert chunk.size <= max_array
        expected = f"0-{chunk.size - 1}" + (f"%{min(max_parallel, chunk.size)}" if max_parallel else "")
        assert chunk.array_spec == expected


@pytest.mark.parametrize(("text", "minutes"), [
    ("90", 90), ("1:30", 2), ("02:00:00", 120), ("1-00", 1440), ("1-02:03", 1563), ("0-00:00:01", 1)])
def test_slurm_time_strings(text: str, minutes: int) -> None:
    assert parse_time_minutes(text) == minutes


@pytest.mark.parametrize("text", ["abc", "1:2:3:4", "-5", ""])
def test_bad_time_strings(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time_minutes(text)


@pytest.mark.parametrize(("text", "mb"), [("4G", 4096), ("500M", 500), ("1.5G", 1536), ("2048", 2048),
                                          ("512K", 1), ("1T", 1048576), ("4gb", 4096)])
def test_memory_strings(text: str, mb: int) -> None:
    assert parse_mem_mb(text) == mb


@pytest.mark.parametrize(("text", "seconds"), [("00:00:06", 6), ("1-02:03:04", 93784), ("05:00", 300),
                                               ("UNLIMITED", None), ("Partition_Limit", None), ("", None)])
def test_sacct_durations(text: str, seconds: int | None) -> None:
    assert parse_duration_seconds(text) == seconds

