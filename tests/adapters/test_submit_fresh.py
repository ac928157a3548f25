"""The tick of a `submit` that created its campaign reads none of the campaign's history, which is
empty — but only after one read under the lease shows that nothing has happened to it since (another
user's tick, a crash): then it is an ordinary tick, and nothing is submitted twice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters.store import Store
from campaignctl.services import submit as submit_service
from campaignctl.services.reconcile import reconcile
from tests.conftest import logged, write_spec
from tests.fakeslurm import FakeSlurm

SPEC = """\
name: {name}
command: [python3, train.py, --lr, "{{lr}}", --seed, "{{seed}}"]
matrix: {{lr: [0.1, 0.01], seed: [0, 1, 2]}}
resources: {{cpus_per_task: 1, mem: 1G, time: "00:10:00"}}
array: {{max_parallel: 4}}
"""


def statements(run: Callable[[], object]) -> list[str]:
    """The SQL statements `run()` makes on the store's tables: not transaction control, SQLite's
    PRAGMAs, nor PostgreSQL's catalog and advisory locks (the write lock of the hash chains)."""
    seen: list[str] = []

    def count(conn: object, cursor: object, statement: str, *_: object) -> None:
        own = statement.split()[0].upper() not in ("PRAGMA", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
        if own and "pg_catalog" not in statement and "pg_advisory" not in statement:
            seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", count)
    try:
        run()
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", count)
    return seen


def test_a_new_campaigns_submit_decides_as_a_full_tick_would_and_reads_a_handful(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    Store.open()  # the database exists: its migrations are not the submit's
    sql = statements(lambda: submit_service.submit(write_spec(tmp_path, SPEC.format(name="fresh"))))
    # the same spec, its first tick made as every later tick is (no `created`: every read)
    real_first_tick = submit_service._first_tick
    monkeypatch.setattr(submit_service, "_first_tick",
                        lambda store, name, spec, created: real_first_tick(store, name, spec, False))
    full = statements(lambda: submit_service.submit(write_spec(tmp_path, SPEC.format(name="full"), "b.yaml")))

    def decided(name: str) -> list[tuple[object, ...]]:
        return [(e.rule, e.action, e.status, e.task_index, e.reason, e.params["tasks"], e.params.get("throttle"))
                for e in logged(name, starts=True)]
    assert decided("fresh") == decided("full") == [
        ("start", "start", "applied", 0, decided("full")[0][4], [0, 1, 2, 3, 4, 5], 4)]
    assert fake_slurm.submitted == 2
    reads = [s for s in sql if s.lstrip().upper().startswith("SELECT")]
    # 17: the node ledger's marks (one query: the first arrays leave out the nodes it excludes)
    assert any("FROM node_marks" in s for s in reads)
    assert len(reads) <= 17 < len([s for s in full if s.lstrip().upper().startswith("SELECT")]), (len(reads), sql)


def test_a_campaign_another_tick_has_started_is_ticked_in_full(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit_service.submit(write_spec(tmp_path, SPEC.format(name="twice")))
    # as if this submit's tick came after another tick had started the campaign: `created`, but
    # the read under the lease finds its submission, so the tick reads everything and starts nothing
    result = reconcile("twice", by_hand=True, created=True)
    assert result.status == "ok" and fake_slurm.submitted == 1
    assert [e.action for e in logged("twice", starts=True)] == ["start"]
