"""Reconcile ingests what running attempts append to $CAMPAIGNCTL_METRICS, incrementally."""

from __future__ import annotations

import json
from pathlib import Path

from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm


def _metrics_file(tmp_path: Path, task: int) -> Path:
    store = Store.open()
    record = store.campaign("mx")
    assert record is not None
    attempt = next(a for a in store.attempts(record.id) if a.task_index == task)
    path = tmp_path / "runs" / "mx" / "tasks" / str(task) / attempt.token / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_new_lines_are_ingested_once_and_a_partial_line_waits(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit(write_spec(tmp_path, "name: mx\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1]}\n"))
    array = min(fake_slurm.jobs, key=int)
    fake_slurm.set_state(array, 0, "RUNNING", "0:0", "node1")
    path = _metrics_file(tmp_path, 0)
    path.write_text(json.dumps({"step": 1, "loss": 0.9}) + "\n" + '{"step": 2, "lo')
    reconcile("mx")
    store = Store.open()
    record = store.campaign("mx")
    assert record is not None
    assert [r[2:5] for r in MetricsStore(store.engine).rows(record.id)] == [(1, "loss", 0.9)]
    with path.open("a") as f:
        f.write('ss": 0.7}\n' + json.dumps({"step": 3, "loss": 0.5, "acc": 0.6}) + "\n")
    fake_slurm.set_state(array, 0, "COMPLETED", "0:0", "node1")
    reconcile("mx")  # the attempt ended this tick: its last lines are still read
    reconcile("mx")  # and nothing twice
    rows = MetricsStore(store.engine).rows(record.id)
    assert [r[2:5] for r in rows] == [(1, "loss", 0.9), (2, "loss", 0.7), (3, "loss", 0.5), (3, "acc", 0.6)]
    assert [r[2:5] for r in MetricsStore(store.engine).rows(record.id, "acc")] == [(3, "acc", 0.6)]


def test_the_slow_node_rule_reads_the_latest_completions_with_their_last_step(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    """The store's window (on SQLite, and on PostgreSQL in its lane) is the one replay takes from
    the same rows (core/nodes/evidence.py `latest`): the attempts that ended last, by task."""
    submit(write_spec(tmp_path, "name: mx\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1, 2, 3]}\n"))
    array = min(fake_slurm.jobs, key=int)
    ends = {0: "2026-11-30T10:04:00", 1: "2026-11-30T10:01:00", 2: "2026-11-30T10:03:00", 3: "2026-11-30T10:02:00"}
    for task in ends:
        fake_slurm.set_state(array, task, "RUNNING", "0:0", f"node{task + 1}")
    for task in (0, 2):
        _metrics_file(tmp_path, task).write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n"
                                                         for s in range(1, 4 + task)))
    reconcile("mx")
    for task, end in ends.items():
        fake_slurm.set_state(array, task, "COMPLETED", "0:0", f"node{task + 1}", end=end)
    reconcile("mx")
    store = Store.open()
    record = store.campaign("mx")
    assert record is not None
    found = MetricsStore(store.engine).completions(record.id, 2)
    assert [(task, nodes, step) for task, _, nodes, _, _, _, step in found] == [(0, "node1", 3), (2, "node3", 5)]
    assert [row[0] for row in MetricsStore(store.engine).completions(record.id, 200)] == [0, 1, 2, 3]
