"""Pending tasks resized alike by one `scontrol update` are one log row; reading it gives back
each task's decision."""

from __future__ import annotations

from campaignctl.core.decisions.action_records import ResizePending, Resubmit
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.decisions.decision_rows import collapse, expand, members


def resize(task: int, reason: str = "pending, in the group of task 0 …") -> Decision:
    return Decision(task, f"s1.{task}", "out_of_memory", "resize_pending", reason,
                    {"job_id": f"12_{task}", "state": "PENDING", "trigger_task": 0},
                    ResizePending(changes={"mem_mb": (1, 2)}))


def test_decisions_of_one_action_group_rule_and_reason_share_a_row() -> None:
    retry = Decision(0, "s1.0", "out_of_memory", "resubmit", "oom", {"job_id": "12_0"}, Resubmit())
    planned = [(retry, "g0"), (resize(1), "g1"), (resize(2), "g1"), (resize(3, "other reason"), "g1"),
               (resize(4), "g2")]
    rows, where = collapse(planned)
    assert where == [0, 1, 1, 2, 3]
    assert [members(d.params) for d, _ in rows] == [None, [(1, "s1.1", "12_1"), (2, "s1.2", "12_2")], None, None]
    grouped = rows[1][0]
    assert "job_id" not in grouped.inputs and grouped.task_index == 1
    assert [(t, token, inputs["job_id"]) for t, token, _, inputs in
            expand(grouped.task_index, grouped.attempt_token, grouped.params, grouped.inputs)] == [
        (1, "s1.1", "12_1"), (2, "s1.2", "12_2")]
    assert expand(0, "s1.0", retry.params, retry.inputs) == [(0, "s1.0", retry.params, {"job_id": "12_0"})]
