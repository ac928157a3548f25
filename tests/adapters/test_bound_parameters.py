"""A chunk of packed elements names more tasks than one SQL statement may bind: SQLite before
3.32 allows 999 bound parameters (later builds 32,766; Debian's 250,000), PostgreSQL 65,535.
A 1,000,000-task campaign of 1,001-element arrays of 500 tasks named 500,500 in one `IN (…)`,
and its first tick failed with "too many SQL variables". Here the store's SQLite connections are
held to 999, as an older SQLite is, and a chunk of 2,000 tasks goes out."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm

OLD_SQLITE_LIMIT = 999


@pytest.fixture
def old_sqlite_limit() -> Iterator[None]:
    def hold(dbapi_connection: Any, _record: Any) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, OLD_SQLITE_LIMIT)
    sa.event.listen(sa.Engine, "connect", hold)
    yield
    sa.event.remove(sa.Engine, "connect", hold)


def test_a_chunk_of_more_tasks_than_a_statement_may_bind_goes_out_and_ticks_on(
        tmp_path: Path, fake_slurm: FakeSlurm, old_sqlite_limit: None) -> None:
    tasks = 2 * 1000
    result = submit(write_spec(tmp_path, f"""\
name: wide
command: ["true", "{{i}}"]
matrix: {{i: [{", ".join(map(str, range(tasks)))}]}}
resources: {{mem: 100M, time: "00:01:00"}}
pack: {{per_job: 2, processes: 1}}
""", "wide.yaml"))
    assert result.outcome == "created" and result.sbatch_calls == 1, result.notes
    [job] = fake_slurm.jobs.values()
    assert job.size == tasks // 2  # one array of 1,000 elements: 2,000 tasks in one chunk
    fake_slurm.finish(job.job_id)
    tick = reconcile("wide")
    assert tick.status == "ok" and not tick.failed, tick
