from __future__ import annotations

import pytest

from campaignctl.core.base.errors import NotFoundError, UsageError
from campaignctl.core.spec.task_selection import parse_task_list, select_tasks


def test_indices_and_ranges() -> None:
    assert parse_task_list("0,3-5, 9") == [0, 3, 4, 5, 9]
    assert parse_task_list("4-4,4") == [4]


@pytest.mark.parametrize(("text", "fragment"), [("a", "'a' is not an index"), ("5-3", "from low to high"),
                                                ("1,,2", "'' is not an index"), ("-1", "'-1' is not"),
                                                ("", "names no task"), (" ", "names no task")])
def test_a_bad_list_says_which_part_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        parse_task_list(text)


def test_selected_by_index_and_by_state() -> None:
    states = {0: "FAILED", 1: "COMPLETED", 2: "CANCELLED", 3: "FAILED"}
    assert select_tasks(states, None, ["failed", " cancelled"], "c") == [0, 2, 3]
    assert select_tasks(states, [0, 1, 2], ["FAILED"], "c") == [0]
    with pytest.raises(NotFoundError, match="campaign 'c' has no task 7"):
        select_tasks(states, [7], None, "c")
