"""Memory efficiency on the real cluster is read from the memory cgroup that enforces the limit.

Four forked workers share a 60 MiB buffer: summed RSS (the sampler's, and sacct MaxRSS under
jobacct_gather/linux) counts it five times, 300 MiB of a 200M allocation, though the job never
came near its limit. The lab runs cgroup v1 with ConstrainRAMSpace=yes, as Slurm 22.05 and 24.11
set it up: the task sits in a `task_0` leaf without a limit, below `step_batch`, which has one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters.store import Store
from campaignctl.adapters.telemetry_store import TelemetryStore
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_reconcile_real import ticking_until_finished

pytestmark = pytest.mark.slurm

SHARED = """\
import os, time
block = bytearray(os.urandom(60 * 2**20))  # touched: 60 MiB resident
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:  # a worker that only reads: its pages stay shared with the parent
        time.sleep(4)
        os._exit(0 if block[-1] >= 0 else 1)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


def test_memory_efficiency_is_the_cgroup_peak_not_the_summed_rss_of_forked_workers(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    (tmp_path / "shared.py").write_text(SHARED)
    submit(write_spec(tmp_path, """\
name: forked
command: [python3, shared.py]
tasks: [{}]
resources: {mem: 200M, time: "00:05:00"}
telemetry: {interval: 1s}
""", "forked.yaml"))
    ticking_until_finished("forked", timeout_s=120)
    store = Store.open()
    record = store.campaign("forked")
    assert record is not None
    summary = TelemetryStore(store.engine).by_task(record.id)[0]
    assert summary.rss_max_mb > 200  # the shared block counted once per process
    assert 60 < summary.cgroup_mem_peak_mb < 200  # the kernel's count: once, under the limit
    [row] = status("forked").tasks
    assert row.state == "COMPLETED"
    assert row.efficiency is not None and row.efficiency.mem_source == "cgroup"
    assert row.efficiency.mem is not None and 0.3 < row.efficiency.mem < 1.0
