"""A store from before the screens' indexes (migration 021): its GPUs' energy, kept on the
telemetry rows, moves onto the attempts that spend's GROUP BY reads; the open tasks (a failure, a
retry) and the done ones are those the partial indexes hold, and spend sums both."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters import store_engine
from campaignctl.adapters.store_migrations import MIGRATIONS
from campaignctl.adapters.usage_queries import UsageQueries

NOW = "2026-11-30T10:00:00+00:00"


def _rows(conn: sa.Connection) -> None:
    run = conn.exec_driver_sql
    run("INSERT INTO campaigns (id, name, state, current_revision, run_dir, owner, created_at) "
        f"VALUES (1, 'c', 'active', 1, '/tmp/c', 'alice', '{NOW}')")
    run("INSERT INTO submissions (id, campaign_id, revision, token, state, job_id, array_spec, size, folder, "
        f"resources_json, created_at, updated_at) VALUES (1, 1, 1, 't', 'submitted', '7', '0-2', 3, '/tmp/c', "
        f"'{{\"gpus\": 1}}', '{NOW}', '{NOW}')")
    for task in range(3):
        run(f"INSERT INTO tasks (id, campaign_id, task_index, params_json, argv_json, env_json) "
            f"VALUES ({task + 1}, 1, {task}, '{{}}', '[]', '{{}}')")
    # task 0 done; task 1 failed then completed; task 2 failed
    for attempt, (task, number, state) in enumerate(((1, 1, "COMPLETED"), (2, 1, "FAILED"), (2, 2, "COMPLETED"),
                                                      (3, 1, "FAILED")), start=1):
        run(f"INSERT INTO attempts (id, task_id, submission_id, attempt_number, array_index, token, job_id, state, "
            f"created_at, elapsed_s) VALUES ({attempt}, {task}, 1, {number}, {task - 1}, 't.{attempt}', "
            f"'7_{task - 1}', '{state}', '{NOW}', 60)")
    run("INSERT INTO telemetry (attempt_id, inode, file_offset, summary_json, updated_at, gpu_energy_j) "
        f"VALUES (1, 1, 0, '{{}}', '{NOW}', 1500.0), (3, 1, 0, '{{}}', '{NOW}', 500.0)")


def test_the_gpu_energy_moves_onto_the_attempts_and_the_open_tasks_are_indexed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    before = [m for m in MIGRATIONS if m[0] < "021"]
    monkeypatch.setattr(store_engine, "MIGRATIONS", before)
    store_engine.migrate(engine)
    with engine.begin() as conn:
        _rows(conn)
    monkeypatch.setattr(store_engine, "MIGRATIONS", MIGRATIONS)
    assert store_engine.migrate(engine) == [m[0] for m in MIGRATIONS if m[0] >= "021"]

    with engine.connect() as conn:
        energy = dict(conn.exec_driver_sql("SELECT id, gpu_energy_j FROM attempts").all())
        open_tasks, done_tasks = (sorted({r[0] for r in conn.exec_driver_sql(
            f"SELECT task_id FROM attempts INDEXED BY attempts_{kind} WHERE {condition.format(a='attempts')}").all()})
            for kind, condition in (("open", store_engine.OPEN), ("done", store_engine.DONE)))
    assert energy == {1: 1500.0, 2: None, 3: 500.0, 4: None}
    assert open_tasks == [2, 3]  # a failure, and a retry that completed; not the task done at once
    assert done_tasks == [1]
    completed = [g for g in UsageQueries(engine).groups(1, ("COMPLETED",))]
    assert [(g.attempts, g.energy_j, g.gpu_energy) for g in completed] == [(2, 2000.0, 2)]
