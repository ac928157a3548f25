"""The bottleneck label on the real cluster: what the sampler reads of a task's CPU, kernel time
and I/O names what held it back. Three tasks of one campaign, each a real program: a shell loop
whose short-lived `cat`s stream a 32 MiB file on the shared filesystem again and again (a data
loader's shape), a Python spinner, and a sleeper."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.usage.efficiency import efficiency_text
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_reconcile_real import ticking_until_finished

pytestmark = pytest.mark.slurm

WORK = """\
import subprocess, sys, time
kind, data = sys.argv[1], sys.argv[2]
if kind == "stream":
    subprocess.run(["sh", "-c", 'end=$(($(date +%s) + 8)); while [ "$(date +%s)" -lt "$end" ]; '
                    'do cat "$0" > /dev/null; done', data], check=True)
elif kind == "spin":
    end = time.time() + 8
    while time.time() < end:
        pass
else:
    time.sleep(8)
"""


def test_a_streamer_is_io_bound_a_spinner_compute_bound_and_a_sleeper_idle(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    (tmp_path / "work.py").write_text(WORK)
    data = tmp_path / "data.bin"
    data.write_bytes(b"\1" * (32 * 2**20))
    submit(write_spec(tmp_path, f"""\
name: bound
command: [python3, work.py, "{{kind}}", "{data}"]
matrix: {{kind: [stream, spin, sleep]}}
resources: {{mem: 300M, time: "00:05:00"}}
telemetry: {{interval: 1s}}
""", "bound.yaml"))
    ticking_until_finished("bound", timeout_s=180)
    rows = {row.params["kind"]: row for row in status("bound").tasks}
    assert {kind: row.state for kind, row in rows.items()} == dict.fromkeys(("stream", "spin", "sleep"), "COMPLETED")
    found = {kind: row.efficiency.bottleneck if row.efficiency else None for kind, row in rows.items()}
    why = {kind: row.efficiency.bottleneck_why if row.efficiency else None for kind, row in rows.items()}
    assert found == {"stream": "io", "spin": "compute", "sleep": "idle"}, why
    stream = rows["stream"].efficiency
    assert stream is not None and stream.io_mbps is not None and stream.io_mbps > 50, why
    assert efficiency_text(stream).endswith("bound io")
