"""The bottleneck label on the real cluster: what the sampler reads of a task's CPU, kernel time
and I/O names what held it back. Three tasks of one campaign, each a real program: a shell loop
whose short-lived `cat`s stream a 32 MiB file on the shared filesystem again and again (a data
loader's shape), a Python spinner, and a sleeper."""

from __future__ import annotations

import json
import uuid
from itertools import pairwise
from pathlib import Path

import pytest

from campaignctl.core.usage.efficiency import efficiency_text
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import history, ticking_until_finished

pytestmark = pytest.mark.slurm

WORK = """\
import subprocess, sys, time
kind, data, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "stream":
    subprocess.run(["sh", "-c", 'end=$(($(date +%s) + $1)); while [ "$(date +%s)" -lt "$end" ]; '
                    'do cat "$0" > /dev/null; done', data, str(seconds)], check=True)
elif kind == "spin":
    end = time.time() + seconds
    while time.time() < end:
        pass
else:
    time.sleep(seconds)
"""


def work(tmp_path: Path) -> Path:
    """The program, and the 32 MiB file the streamer reads: its path."""
    (tmp_path / "work.py").write_text(WORK)
    data = tmp_path / "data.bin"
    data.write_bytes(b"\1" * (32 * 2**20))
    return data


def test_a_streamer_is_io_bound_a_spinner_compute_bound_and_a_sleeper_idle(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    data = work(tmp_path)
    submit(write_spec(tmp_path, f"""\
name: bound
command: [python3, work.py, "{{kind}}", "{data}", "8"]
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


def test_pack_auto_runs_the_io_bound_tasks_of_a_profile_one_at_a_time_and_says_why(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    """Three streamers of a profile run and are labelled I/O-bound; a second campaign of the
    profile with `pack: auto` on 2 CPUs would run two of its short CPU tasks at once, and runs
    them one after another instead, its pack decision's evidence counting the I/O-bound runs."""
    data = work(tmp_path)
    tag = uuid.uuid4().hex[:6]

    def spec(name: str, pack: str) -> Path:
        return write_spec(tmp_path, f"""\
name: {name}
profile: io-{tag}
command: [python3, work.py, stream, "{data}", "4", "{{seed}}"]
matrix: {{seed: [1, 2, 3]}}
resources: {{cpus_per_task: 1, mem: 300M, time: "00:02:00"}}
telemetry: {{interval: 1s}}
{pack}
""", f"{name}.yaml")
    first = f"io-first-{tag}"
    submit(spec(first, ""))
    ticking_until_finished(first, timeout_s=180)
    assert [row.efficiency.bottleneck if row.efficiency else None for row in status(first).tasks] == ["io"] * 3

    second = f"io-packed-{tag}"
    path = spec(second, "pack: {auto: true, cpus: 2}")
    dry = cli("submit", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    flat = " ".join(dry.stdout.split())
    assert "1 at a time" in flat and "3 of 3 measured attempts of the group were I/O-bound" in flat, flat
    assert cli("submit", str(path)).returncode == 0
    ticking_until_finished(second, timeout_s=180)
    rows = history(second)
    assert {r.state for r in rows} == {"COMPLETED"} and len({r.job_id for r in rows}) == 1
    [packed] = [e for e in logged(second) if e.action == "pack"]
    assert (packed.inputs["io_bound"], packed.inputs["labelled"], packed.params["processes"]) == (3, 3, 1)
    # one after another: each task's sampler started after the one before it ended
    spans = sorted(sampled_span(tmp_path / "runs" / second / "tasks" / str(r.task_index) / r.token) for r in rows)
    assert all(before[1] <= after[0] for before, after in pairwise(spans)), spans


def sampled_span(attempt_dir: Path) -> tuple[float, float]:
    events = [json.loads(line) for line in (attempt_dir / "telemetry.jsonl").read_text().splitlines()]
    [start] = [e["t"] for e in events if e.get("event") == "start"]
    [end] = [e["t"] for e in events if e.get("event") == "end"]
    return start, end


def test_gpus_that_wait_on_nvlink_are_communication_bound(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU task (the lab's GPUs answer through tests/integration/fake_nvml) whose GPUs sit at
    20 % while NVLink carries 2 GiB/s each way on each of two links; beside it one whose GPU is
    busy at 95 % with the same traffic: communication, then compute."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent / "fake_nvml"))
    monkeypatch.setenv("FAKE_NVML_NVLINK_KIBS", str(2 * 2**20))
    (tmp_path / "work.py").write_text(WORK)
    rows = {}
    for util in (20, 95):
        monkeypatch.setenv("FAKE_NVML_UTIL", str(util))  # sbatch exports the environment to the job
        name = f"links-{util}"
        submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, work.py, sleep, none, "5"]
tasks: [{{}}]
resources: {{gpus: 1, cpus_per_task: 1, mem: 300M, time: "00:05:00"}}
telemetry: {{interval: 1s}}
""", f"{name}.yaml"))
        ticking_until_finished(name, timeout_s=120)
        [rows[util]] = status(name).tasks
    found = {util: (row.efficiency.bottleneck, row.efficiency.bottleneck_why) if row.efficiency else None
             for util, row in rows.items()}
    assert found[20] is not None and found[20][0] == "communication", found
    assert found[95] is not None and found[95][0] == "compute", found
    assert "MB/s over NVLink while its GPUs were 20 % utilised" in (found[20][1] or ""), found
