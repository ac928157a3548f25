"""The exit code a status row shows: the program's, never sacct's 0:0 for a job that still runs
or that Slurm itself ended (`TIMEOUT|0:0`, NODE_FAIL, PREEMPTED)."""

from __future__ import annotations

import pytest

from campaignctl.core.screens.status import shown_exit


@pytest.mark.parametrize(("state", "code", "shown"), [
    ("COMPLETED", 0, 0), ("FAILED", 3, 3), ("OUT_OF_MEMORY", 0, 0),
    ("RUNNING", 0, None), ("PENDING", 0, None),
    ("TIMEOUT", 0, None), ("NODE_FAIL", 0, None), ("PREEMPTED", 0, None),
    ("TIMEOUT", 143, 143),  # a program that exited on the time limit's SIGTERM says so itself
])
def test_an_exit_code_is_shown_only_where_the_program_gave_one(state: str, code: int, shown: int | None) -> None:
    assert shown_exit(state, code) == shown
