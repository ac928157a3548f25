"""Telemetry on the real cluster: the job-side sampler writes, reconcile ingests, status shows."""

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

BUSY = "import time\nend = time.time() + 6\nwhile time.time() < end: pass\nblock = bytearray(64 * 2**20)\n" \
       "time.sleep(2)\n"


def test_a_task_writes_cpu_and_rss_telemetry_that_reconcile_ingests(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    (tmp_path / "busy.py").write_text(BUSY)
    submit(write_spec(tmp_path, """\
name: telemetry
command: [python3, busy.py]
tasks: [{}]
resources: {mem: 300M, time: "00:05:00"}
telemetry: {interval: 1s}
""", "telemetry.yaml"))
    ticking_until_finished("telemetry", timeout_s=120)
    store = Store.open()
    record = store.campaign("telemetry")
    assert record is not None
    summary = TelemetryStore(store.engine).by_task(record.id)[0]
    assert summary.samples >= 4 and summary.ended
    # the busy loop: a good part of its core. Not "most": CI runs both Slurms' suites and the unit
    # suites at once on 2 cores, where a spinner was measured at 47.9 %
    assert summary.cpu_max > 30
    assert summary.rss_max_mb > 60  # the 64 MiB block
    assert summary.nvml and summary.nvml != "ok"  # no NVIDIA driver on the lab nodes: said why
    assert summary.gpu_samples == 0
    [row] = status("telemetry").tasks
    assert row.cpu_mean_pct is not None and row.rss_max_mb is not None and row.rss_max_mb > 60
