"""A submission and its attempt rows as the exactly-once protocol writes them before sbatch runs
(one transaction: with the tick's decisions, adapters/decision_log.py, or alone, adapters/store.py)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from campaignctl.adapters import identity
from campaignctl.adapters.store_engine import driver_sql, in_parts, insert_many, inserted_id, utc_now
from campaignctl.adapters.store_schema import attempts, submissions, tasks
from campaignctl.core.decisions.actions import SubmissionIntent


def insert_submission(conn: sa.Connection, campaign_id: int, intent: SubmissionIntent) -> int:
    """The intent's `task_params` (parameters JSON by task index, for tasks a rule gave other
    parameters) go on the attempt rows; its `adopted` tasks' rows take them too (a search's trial
    is its asked params from now on, whatever else shares its array: a retry's attempt keeps its
    own on the attempt row)."""
    now, token, chunk, task_params = utc_now(), intent.token, intent.chunk, intent.task_params
    # through the driver: a chunk of 500,500 tasks is 557 statements each, which SQLAlchemy's
    # compiling made 2 s of a 1,000,000-task submit
    task_ids: dict[int, int] = {}
    for part in in_parts(chunk.task_indices):
        task_ids.update(conn.exec_driver_sql(driver_sql(
            conn, f"SELECT task_index, id FROM tasks WHERE campaign_id = ? AND task_index IN ({_marks(part)})"),
            (campaign_id, *part)).all())
    numbers: dict[int, int] = {}
    for ids in in_parts(list(task_ids.values())):
        numbers.update(conn.exec_driver_sql(driver_sql(
            conn, f"SELECT task_id, MAX(attempt_number) FROM attempts WHERE task_id IN ({_marks(ids)}) "
            "GROUP BY task_id"),
            tuple(ids)).all())
    submission_id = inserted_id(conn.execute(submissions.insert().values(
        campaign_id=campaign_id, revision=intent.revision, token=token, state="intent",
        array_spec=chunk.array_spec, size=chunk.size, folder=intent.folder, resources_json=intent.resources_json,
        kind=intent.kind, requeue=int(intent.requeue), created_at=now, updated_at=now,
        submitted_by=identity.user_name(), pack=chunk.pack.to_json() if chunk.pack else "", cluster=intent.cluster)))
    shares = intent.shares()
    insert_many(conn, attempts, [
        {"task_id": task_ids[t], "submission_id": submission_id,
         "attempt_number": numbers.get(task_ids[t], 0) + 1, "array_index": chunk.element_of(i),
         "token": f"{token}.{i}", "state": "SUBMITTING", "created_at": now,
         "params_json": task_params.get(t), "alloc_tres": shares[chunk.element_of(i)] if shares else ""}
        for i, t in enumerate(chunk.task_indices)])
    taken = [{"ti": t, "pj": p} for t, p in task_params.items() if t in intent.adopted]
    if taken:  # SQLAlchemy refuses an executemany of no rows
        conn.execute(tasks.update().where(tasks.c.campaign_id == campaign_id, tasks.c.task_index == sa.bindparam("ti"))
                     .values(params_json=sa.bindparam("pj")), taken)
    return int(submission_id)


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))
