"""The decision log's rows: one row for the pending tasks a tick resized alike, one per decision
otherwise. Pure.

A first attempt's OOM can raise a thousand pending tasks at once (core/tick/siblings.py): one
`scontrol update JobId=<array>_[…]` carries them, and one row says so, the tasks in its params
(`members: [[index, attempt token, job id], …]`), instead of a thousand rows a person would page
through. Readers that act on tasks — status, rollback, replay, a crash's repair — see each task's
decision again through `expand` (every copy keeps the row's id: one outcome covers them all)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from campaignctl.core.decisions.action_records import ResizePending
from campaignctl.core.decisions.decision import Decision

GROUPED = ("resize_pending",)
MEMBERS = "members"  # the params key of a grouped row: [[task index, attempt token, job id], …]


def collapse(planned: Sequence[tuple[Decision, str]]) -> tuple[list[tuple[Decision, str]], list[int]]:
    """(the rows to write, and for each planned decision the index of the row that holds it).
    Decisions of one action group (the same `scontrol update`), rule, mode and reason share a row."""
    rows: list[tuple[Decision, str]] = []
    members: dict[int, list[Decision]] = {}
    keys: dict[tuple[str, str, str, str, str], int] = {}
    where = []
    for d, group in planned:
        key = (group, d.rule, d.mode, d.gate, d.reason)
        if d.action not in GROUPED or not group:
            where.append(len(rows))
            rows.append((d, group))
            continue
        if key not in keys:
            keys[key] = len(rows)
            rows.append((d, group))
            members[keys[key]] = []
        members[keys[key]].append(d)
        where.append(keys[key])
    for at, group_members in members.items():
        if len(group_members) > 1:
            first, group = rows[at]
            listed = tuple((m.task_index, m.attempt_token, m.inputs.get("job_id")) for m in group_members)
            inputs = {k: v for k, v in first.inputs.items() if k != "job_id"}
            p = first.typed
            assert isinstance(p, ResizePending)  # the one GROUPED action
            rows[at] = (replace(first, inputs=inputs, typed=replace(p, members=listed)), group)
    return rows, where


def members(params: Mapping[str, object]) -> list[tuple[int, str, object]] | None:
    """The tasks a grouped row holds (index, attempt token, job id); None for a row of one."""
    listed = params.get(MEMBERS)
    if not isinstance(listed, list):
        return None
    return [(int(m[0]), str(m[1]), m[2]) for m in listed if isinstance(m, list) and len(m) == 3]


def expand(task_index: int, token: str, params: Mapping[str, object],
           inputs: Mapping[str, object]) -> list[tuple[int, str, dict[str, object], dict[str, object]]]:
    """A row as the decisions it holds: (task index, attempt token, params, inputs) each."""
    listed = members(params)
    if listed is None:
        return [(task_index, token, dict(params), dict(inputs))]
    own = {k: v for k, v in params.items() if k != MEMBERS}
    return [(index, attempt, own, {"job_id": job_id, **inputs}) for index, attempt, job_id in listed]
