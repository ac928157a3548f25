"""Campaign-wide max_parallel shared out over arrays with pending work."""

from __future__ import annotations

import pytest

from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.throttle import loads_of, plan_throttles


def views(*arrays: tuple[str, str]) -> list[TaskView]:
    """arrays: (job id, states as letters R/P/C), one task per letter, task indices in order."""
    out, index = [], 0
    for job, states in arrays:
        for i, letter in enumerate(states):
            state = {"R": "RUNNING", "P": "PENDING", "C": "COMPLETED"}[letter]
            out.append(TaskView(index, (AttemptView(f"tok{job}.{i}", 1, state, f"{job}_{i}", Resources()),)))
            index += 1
    return out


@pytest.mark.parametrize(("arrays", "current", "cap", "expected"), [
    ([("10", "RRPP")], {"10": 4}, 4, {}),                      # one array already at the cap
    ([("10", "RRPP")], {"10": None}, 2, {"10": 2}),            # unthrottled, cap lowered to 2
    ([("10", "RRPP")], {"10": 8}, 2, {"10": 2}),               # spec lowered max_parallel 8 → 2
    ([("10", "RRRR"), ("11", "PP")], {"10": 4, "11": 2}, 4, {"11": 1}),  # cap used by 10: 11 gets the minimum 1
    ([("10", "RRCC"), ("11", "PP")], {"10": 4, "11": 1}, 4, {"11": 2}),  # 10 finishing: 11 may use the rest
    ([("10", "RPPP"), ("11", "PP")], {"10": 4, "11": 1}, 4, {}),  # oldest first; 11 stays at 1
    ([("10", "CCCC")], {"10": 4}, 4, {}),                      # nothing pending: nothing to throttle
    ([("10", "RRPP")], {"10": 3}, None, {}),                   # no cap in the spec
    ([("10", "RP")], {"10": 5}, 8, {}),                        # 5 or 8 both let everything run
    # several clusters: ids qualified (core/slurm/job_ref.py), lab2:9 running only counts against the cap
    ([("lab2:9", "RRR"), ("10", "RP"), ("lab2:8", "PP")], {"10": 2, "lab2:8": 1}, 4, {"10": 1}),
])
def test_throttles(arrays: list[tuple[str, str]], current: dict[str, int | None], cap: int | None,
                   expected: dict[str, int]) -> None:
    decisions = plan_throttles(loads_of(views(*arrays)), current, cap)
    assert {str(d.params["array_job_id"]): d.params["throttle"] for d in decisions} == expected
    for d in decisions:
        assert d.action == "throttle" and d.rule == "max_parallel" and "may run" in d.reason
