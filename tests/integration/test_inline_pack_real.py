"""Plain-process packs on the real cluster (`pack: {per_job: K, processes: M}`): an array element
runs its tasks as plain processes, M at a time, with no job step and no accounting row per task
(sacct lists the elements only), each task with its own attempt files, exit status, telemetry and
retry. A task over its memory is ended by the element's runner (its RSS over its `mem`; the
element's cgroup holds M tasks' worth), read by the tick as OUT_OF_MEMORY, retried alone with the
policy's ×1.5, while its neighbours finish."""

from __future__ import annotations

import json
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from tests.conftest import logged, write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import history, ticking_until_finished

pytestmark = pytest.mark.slurm

PROGRAM = """\
import sys, time
i = int(sys.argv[1])
if i == 4:  # 250 MB, touched, of the task's 200M: the runner ends it; its retry gets 300M
    hog = bytearray(250 * 1024 * 1024)
    for at in range(0, len(hog), 4096):
        hog[at] = 1
time.sleep(0.1 + 0.2 * (i % 5))
print(f"task {i} done", flush=True)
"""


def test_tasks_run_as_plain_processes_with_no_step_each_and_one_over_its_memory_is_retried_alone(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    name = f"inline-{uuid.uuid4().hex[:6]}"
    (tmp_path / "prog.py").write_text(PROGRAM)
    spec = write_spec(tmp_path, f"""\
name: {name}
command: [{sys.executable}, prog.py, "{{i}}"]
matrix: {{i: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}}
resources: {{cpus_per_task: 1, mem: 200M, time: "00:02:00"}}
pack: {{per_job: 5, processes: 2}}
telemetry: {{interval: 1s}}
""")
    dry = cli("submit", str(spec), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "packed 5 tasks to a job, 2 at a time as plain processes" in dry.stdout
    assert "#SBATCH --array=0-1\n" in dry.stdout and "#SBATCH --mem=400M" in dry.stdout  # two at once
    assert "#SBATCH --time=6" in dry.stdout or "#SBATCH --time=0:06:00" in dry.stdout  # three rounds of 2 min
    assert cli("submit", str(spec)).returncode == 0
    ticking_until_finished(name, timeout_s=240)

    rows = history(name)
    first = {r.task_index: r for r in rows if r.attempt_number == 1}
    array = (first[0].job_id or "").partition("_")[0]
    assert {t: first[t].job_id for t in range(10)} == {t: f"{array}_{t // 5}" for t in range(10)}
    assert {t: first[t].state for t in range(10)} == {t: "OUT_OF_MEMORY" if t == 4 else "COMPLETED" for t in range(10)}
    [retry] = [r for r in rows if r.attempt_number == 2]
    assert (retry.task_index, retry.state, json.loads(retry.resources_json)["mem_mb"]) == (4, "COMPLETED", 300)
    assert not (retry.job_id or "").startswith(f"{array}_")  # alone, in a job of its own
    [resubmit] = [e for e in logged(name) if e.action == "resubmit"]
    assert (resubmit.task_index, resubmit.rule) == (4, "out_of_memory")

    # no step per task: sacct lists each element, its batch step and the one step its batch script
    # starts (`srun … python -m campaignctl.adapters.job_main`), nothing named by a task's token
    lines = proc.run(["sacct", "-n", "-P", f"-j{array}", "--format=JobID,JobName,State"]).stdout.splitlines()
    print("\n".join(lines))
    tokens = {r.token for r in rows}
    assert not [line for line in lines if line.split("|")[1] in tokens]
    jobs = [line.split("|")[0] for line in lines]
    steps = Counter(job.split(".")[0] for job in jobs if "." in job and job.split(".")[1] not in ("batch", "extern"))
    assert steps == {f"{array}_0": 1, f"{array}_1": 1}, lines  # one srun step an element, not one a task

    run_dir = tmp_path / "runs" / name / "tasks"
    for t, row in first.items():
        files = run_dir / str(t) / row.token
        ended = json.loads((files / "exit.json").read_text())
        if t == 4:
            assert ended["returncode"] == -9 and ended["cause"] == "out_of_memory", ended
            assert "over its memory limit of 200 MB" in ended["evidence"]
        else:
            assert ended["returncode"] == 0 and f"task {t} done" in (files / "output.log").read_text()
        assert (files / "telemetry.jsonl").exists()
    shown = cli("status", name, "--json")
    assert shown.returncode == 0, shown.stderr
