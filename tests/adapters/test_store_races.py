"""Writers racing on one database, as two users' ticks on different campaigns do (issue 15 on
PostgreSQL 15: `decisions_pkey` duplicates when two ticks read the same chain head, a unique
violation on `telemetry`, exit 1). Six processes append to the hash-chained log and upsert the same
attempts' telemetry and metric read positions at the same moment: none fails, the chains verify."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaignctl.adapters import store_engine as store_module
from campaignctl.adapters.decision_chain import stored_rows
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_engine import CHAIN_LOCK_KEY, write_lock
from campaignctl.core.base.errors import DatabaseBusyError
from campaignctl.core.decisions.action_records import Stop
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.governance.chain import verify_chain
from campaignctl.core.policy.policy import Policy
from campaignctl.services.submit import submit
from tests.conftest import COMMAND_TIMEOUT_S, policy_decisions, write_spec
from tests.fakeslurm import FakeSlurm

SPEC = "name: {name}\ncommand: [python3, t.py, '{{i}}']\nmatrix: {{i: [0, 1]}}\n"
WRITERS, WRITES = 6, 15

# Each child imports everything, says so, waits for the starting gun, then writes WRITES ticks'
# worth: one retry of an attempt of its own (decision chain), its outcome (outcome chain), and
# the telemetry and metrics read positions of the campaign's attempts (the same rows in every child).
_CHILD = """
import os, sys, time
from campaignctl.adapters import store_engine
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_files import Position
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.core.decisions.decision import Decision
from campaignctl.core.decisions.action_records import Resubmit
from campaignctl.core.policy.policy import Policy
from campaignctl.core.usage.telemetry import Summary
go, campaign, writer, writes = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
# what is tested is that no write fails or forks a chain, not how long one waits: on a machine
# starved of CPU a writer holding the lock can be off the CPU for longer than the 15-s default
# (the last test here is the one about waits that end in exit 75)
store_engine.BUSY_TIMEOUT_MS = 120_000
store = Store.open()
log = DecisionLog(store.engine)
attempts = [row.id for row in store.history(campaign)]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
for i in range(writes):
    tick = log.begin_tick(writer)
    decision = Decision(0, f"{writer}.{i}", "failed", "resubmit", "flaky", {"exit_code": 75}, Resubmit())
    ids = log.write_intents(tick, campaign, Policy(), [(decision, "")], [], 1)
    log.write_outcomes(ids, "applied", {"writer": writer})
    TelemetryStore(store.engine).save([(a, Position(1, i), Summary()) for a in attempts])
    MetricsStore(store.engine).append([(a, Position(2, i), 0, []) for a in attempts])
"""


@pytest.fixture
def campaigns(backend: str, tmp_path: Path, fake_slurm: FakeSlurm) -> list[int]:
    for name in ("race-a", "race-b"):
        submit(write_spec(tmp_path, SPEC.format(name=name), f"{name}.yaml"))
    return [c.id for c in Store.open().campaigns()]


def test_writers_on_different_campaigns_at_once_neither_fail_nor_fork_the_chains(
        campaigns: list[int], tmp_path: Path) -> None:
    go = tmp_path / "go"
    children = [subprocess.Popen([sys.executable, "-c", _CHILD, str(go), str(campaigns[n % 2]), f"w{n}", str(WRITES)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
                for n in range(WRITERS)]
    try:
        assert all(child.stdout and child.stdout.readline() == "ready\n" for child in children)
        go.touch()
        results = [(child.wait(timeout=COMMAND_TIMEOUT_S), *child.communicate()) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    failed = [(code, err[-2000:]) for code, _, err in results if code != 0]
    assert not failed, failed
    store = Store.open()
    entries = policy_decisions(DecisionLog(store.engine).entries())
    assert len(entries) == WRITERS * WRITES and all(e.status == "applied" for e in entries)
    for chain in ("decision", "outcome"):
        with stored_rows(store.engine, chain) as rows:
            report = verify_chain(chain, rows)
        starts = 2  # each campaign's first array
        assert (report.ok, report.rows, report.problem) == (True, WRITERS * WRITES + starts, "")


def test_a_writer_stuck_holding_the_chain_lock_makes_the_next_exit_75_not_hang(
        campaigns: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 300)
    store = Store.open()
    log = DecisionLog(store.engine)
    tick = log.begin_tick("next")
    stuck = store.engine.connect()
    try:
        stuck.begin()
        write_lock(stuck, CHAIN_LOCK_KEY)  # a tick hung inside its append
        started = time.monotonic()
        with pytest.raises(DatabaseBusyError) as caught:
            stop = Decision(0, "n.0", "failed", "stop", "r", {}, Stop())
            log.write_intents(tick, campaigns[0], Policy(), [(stop, "")], [], 1)
        assert caught.value.exit_code == 75 and time.monotonic() - started < 60  # not held until the writer ends
    finally:
        stuck.close()
    assert policy_decisions(DecisionLog(store.engine).entries()) == []
