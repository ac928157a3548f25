"""Packing on the real cluster: small tasks share one GPU and one array element, each in a job
step of its own (`srun --overlap`, its own memory limit, named by its attempt token), so a
packed task that runs out of memory is told apart from its neighbours by sacct, retried alone,
and the neighbours finish untouched; the pack's GPU-hours are counted once, shared. `pack: auto`
chooses tasks per GPU from what a first campaign of the same profile was measured to use (the
lab's GPUs are /dev/null clones: NVML is the fake in tests/integration/fake_nvml, which serves
the GPU memory tests/integration/toy_trainer.py says it holds)."""

from __future__ import annotations

import json
import re
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from campaignctl.adapters import proc, slurm
from tests.conftest import logged, write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import history, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm
HERE = Path(__file__).parent


@pytest.fixture
def fake_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The jobs' NVML: sbatch exports the environment, so the job's pynvml is the fake."""
    folder = tmp_path / "gpu-memory"
    folder.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(HERE / "fake_nvml"))
    monkeypatch.setenv("FAKE_NVML_DIR", str(folder))
    shutil.copy(HERE / "toy_trainer.py", tmp_path / "toy_trainer.py")
    return folder


def toy_spec(tmp_path: Path, name: str, tasks: list[dict[str, object]], pack: str, profile: str = "",
             steps: int = 6) -> Path:
    return write_spec(tmp_path, f"""\
name: {name}
{f"profile: {profile}" if profile else ""}
command: [{sys.executable}, toy_trainer.py, "{{lr}}", "{{width}}", --host-mb, "{{host}}", --steps, "{steps}"]
tasks: {json.dumps(tasks)}
resources: {{gpus: 1, cpus_per_task: 1, mem: 300M, time: "00:05:00"}}
telemetry: {{interval: 1s}}
{f"pack: {pack}" if pack else ""}
""", name=f"{name}.yaml")


def element_gpu_hours(array_job: str) -> float:
    """GPU-hours Slurm allocated to an array's elements (sacct's own lines, not campaignctl's)."""
    lines = proc.run(["sacct", "-X", "-n", "-P", f"-j{array_job}", "--format=ElapsedRaw,AllocTRES"]).stdout
    total = 0.0
    for line in lines.split():
        elapsed, tres = line.split("|")
        gpus = dict(p.split("=") for p in tres.split(",") if "=" in p).get("gres/gpu", "0")
        total += int(elapsed) * int(gpus) / 3600
    return total


def test_a_packed_task_out_of_memory_is_retried_alone_and_its_neighbours_finish(
        slurm_conf: str, state_home: Path, tmp_path: Path, fake_gpus: Path) -> None:
    name = f"pack-oom-{uuid.uuid4().hex[:6]}"
    tasks = [{"lr": 0.001, "width": 32, "host": 0}, {"lr": 0.001, "width": 64, "host": 0},
             {"lr": 0.01, "width": 64, "host": 0}, {"lr": 0.1, "width": 64, "host": 400},  # 400 MB of 300M
             {"lr": 0.01, "width": 32, "host": 0}]
    path = toy_spec(tmp_path, name, tasks, "{per_gpu: 4, cpus: 1}")
    dry = cli("submit", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "packed 4 per GPU, 4 tasks to a job, 1 CPU to a job" in dry.stdout
    assert "#SBATCH --array=0-1\n" in dry.stdout and "#SBATCH --mem=1200M" in dry.stdout
    assert "#SBATCH --gres=gpu:1\n" in dry.stdout and "#SBATCH --cpus-per-task=1\n" in dry.stdout
    submitted = cli("submit", str(path))
    assert submitted.returncode == 0, submitted.stderr
    ticking_until_finished(name, timeout_s=240)

    rows = history(name)
    first = {r.task_index: r for r in rows if r.attempt_number == 1}
    array = (first[0].job_id or "").partition("_")[0]
    assert {t: first[t].job_id for t in range(5)} == {0: f"{array}_0", 1: f"{array}_0", 2: f"{array}_0",
                                                      3: f"{array}_0", 4: f"{array}_1"}
    assert {t: first[t].state for t in range(5)} == {0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED",
                                                     3: "OUT_OF_MEMORY", 4: "COMPLETED"}
    # the neighbours ran once; the task that ran out of memory was retried alone, with more
    assert sorted(r.task_index for r in rows) == [0, 1, 2, 3, 3, 4]
    [retry] = [r for r in rows if r.attempt_number == 2]
    assert retry.state == "COMPLETED" and not (retry.job_id or "").startswith(array)
    assert json.loads(retry.resources_json)["mem_mb"] == 450  # the usual × 1.5
    steps = proc.run(["sacct", "-n", "-P", f"-j{array}_0", "--format=JobID,JobName,State"]).stdout
    print(steps)
    assert f"{first[3].token}|OUT_OF_MEMORY" in steps and f"{first[0].token}|COMPLETED" in steps
    assert f"{array}_0|cc." in steps and "|COMPLETED" in steps.splitlines()[0]  # the element itself completed

    [packed] = [e for e in logged(name) if e.action == "pack"]
    assert (packed.status, packed.params["per_gpu"], packed.params["per_element"]) == ("applied", 4, 4)
    assert packed.params["tasks"] == [0, 1, 2, 3, 4]
    [resubmit] = [e for e in logged(name) if e.action == "resubmit"]
    assert (resubmit.task_index, resubmit.rule) == (3, "out_of_memory")

    # which tasks shared an allocation: status and results say (task 3's latest attempt ran alone)
    wide = cli("status", name, "--wide").stdout
    assert wide.count(f"{array}_0 ×3") == 3 and f"{array}_1 " in wide
    shared = {r["config"]: r["shared"] for r in json.loads(cli("results", name, "--json").stdout)["data"]["rows"]}
    assert shared == {0: f"{array}_0 ×3", 1: f"{array}_0 ×3", 2: f"{array}_0 ×3", 3: None, 4: None}

    # GPU-hours: the pack's, counted once in shares, never once per task
    shown = json.loads(cli("status", name, "--json").stdout)["data"]
    spent = shown["spend"]["spent"]["gpu_hours"]
    allocated = element_gpu_hours(array) + element_gpu_hours((retry.job_id or "").partition("_")[0])
    print(f"campaign GPU-h {spent:.6f}, sacct allocated {allocated:.6f}")
    assert 0.5 * allocated <= spent <= allocated * 1.01 + 1e-6


def test_pack_auto_chooses_tasks_per_gpu_from_a_first_campaign_of_the_profile(
        slurm_conf: str, state_home: Path, tmp_path: Path, fake_gpus: Path) -> None:
    tag = uuid.uuid4().hex[:6]
    profile = f"pack-{tag}"
    configs = [{"lr": lr, "width": w, "host": 0} for lr in (0.001, 0.01) for w in (32, 64)]
    first = f"pack-first-{tag}"
    assert cli("submit", str(toy_spec(tmp_path, first, configs, "", profile, steps=4))).returncode == 0
    ticking_until_finished(first, timeout_s=240)
    assert {r.state for r in history(first)} == {"COMPLETED"}
    assert len({r.job_id for r in history(first)}) == 4  # unpacked: an element each

    second = f"pack-auto-{tag}"
    path = toy_spec(tmp_path, second, configs, "auto", profile, steps=4)
    dry = cli("submit", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    # each trainer held 8 GiB of the fake 40 GiB GPU (its own processes, as NVML lists them):
    # 80 % of 40 GiB holds 4 of them; the spec's auto allows up to 8. They ran seconds each, under a
    # minute: four at a time as plain processes, no step each (docs/packing.md)
    flat = " ".join(dry.stdout.split())
    shape = r"packed 4 per GPU, \d+ tasks to a job, 1 CPU to a job, 4 at a time as plain processes"
    assert re.search(shape, flat), flat
    assert "bound by GPU memory" in flat and "too short for a job step each" in flat
    submitted = cli("submit", str(path))
    assert submitted.returncode == 0, submitted.stderr
    ticking_until_finished(second, timeout_s=240)
    rows = history(second)
    assert {r.state for r in rows} == {"COMPLETED"} and len({r.job_id for r in rows}) == 1
    [packed] = [e for e in logged(second) if e.action == "pack"]
    assert packed.inputs["samples"] == 4 and packed.inputs["gpu_mem_peak_mb"] == pytest.approx(8192, abs=1)
    assert packed.inputs["gpu_mem_total_mb"] == pytest.approx(40960) and packed.params["per_gpu"] == 4


def test_a_packed_task_stopped_ends_its_own_step_and_its_neighbours_finish(
        slurm_conf: str, state_home: Path, tmp_path: Path, fake_gpus: Path) -> None:
    """What an early stop of a packed task sends (services/act.py): `scancel` of its step, found
    by its attempt token in `squeue -s`; the element and the other steps go on."""
    name = f"pack-stop-{uuid.uuid4().hex[:6]}"
    tasks = [{"lr": 0.001, "width": w, "host": 0} for w in (16, 32, 64)]
    assert cli("submit", str(toy_spec(tmp_path, name, tasks, "{per_gpu: 4, cpus: 1}", steps=12))).returncode == 0
    [victim, *_] = history(name)
    element = victim.job_id or ""

    def started() -> bool:
        steps = proc.run(["squeue", "-s", "--noheader", "-j", element, "--format=%j"], check=False).stdout
        return victim.token in steps.split()
    wait_for("the packed task's step to start", started, 60)
    assert slurm.cancel_step_named(element, victim.token)
    ticking_until_finished(name, timeout_s=180)
    states = {r.task_index: r.state for r in history(name)}
    assert states == {0: "CANCELLED", 1: "COMPLETED", 2: "COMPLETED"}
    assert not slurm.cancel_step_named(element, victim.token)  # ended: nothing of that name to cancel


@pytest.mark.parametrize(("resources", "pack", "elements"), [
    ("cpus_per_task: 1", "{per_job: 2}", 2),  # CPU tasks: two 1-CPU steps in a 2-CPU element
    ("gpus: 1, cpus_per_task: 1", "{per_gpu: 2, cpus: 2}", 2),  # two to a GPU on 2 CPUs
    ("gpus: 1, cpus_per_task: 1", "{per_gpu: 4, cpus: 2}", 1),  # the spec reference's shape, on 2-CPU nodes
])
def test_a_pack_of_more_cpus_than_each_task_launches_its_steps_under_the_sites_binding(
        slurm_conf: str, state_home: Path, tmp_path: Path, resources: str, pack: str, elements: int) -> None:
    # The lab binds as many sites do (TaskPlugin=task/affinity,task/cgroup): the element's own step
    # exports SLURM_CPU_BIND=quiet,mask_cpu:0x3, which each step's srun took as its binding, a
    # mask outside the step's 1 CPU: `srun: error: CPU binding outside of job step allocation`,
    # every step CANCELLED 0:64 at once and every task given up (found by a new user, issue 40).
    name = f"pack-bind-{uuid.uuid4().hex[:6]}"
    assert cli("submit", str(write_spec(tmp_path, f"""\
name: {name}
command: [python3, -c, "import os; print('cpus', sorted(os.sched_getaffinity(0)))", "{{i}}"]
matrix: {{i: [0, 1, 2, 3]}}
resources: {{{resources}, mem: 100M, time: "00:05:00"}}
telemetry: {{interval: 0}}
pack: {pack}
""", f"{name}.yaml"))).returncode == 0
    ticking_until_finished(name, timeout_s=240)
    rows = history(name)
    assert sorted((r.task_index, r.attempt_number, r.state) for r in rows) == [
        (t, 1, "COMPLETED") for t in range(4)], [(r.task_index, r.state, r.evidence) for r in rows]
    arrays = {(r.job_id or "").partition("_")[0] for r in rows}
    assert len(arrays) == 1 and len({r.job_id for r in rows}) == elements
    steps = proc.run(["sacct", "-n", "-P", f"-j{arrays.pop()}", "--format=JobName,State,ExitCode"]).stdout
    assert all(f"{r.token}|COMPLETED|0:0" in steps for r in rows), steps
    for r in rows:  # each task ran, on CPUs of its element's
        log = next((tmp_path / "runs" / name / "tasks" / str(r.task_index)).glob("*/output.log")).read_text()
        assert log.startswith("cpus ["), log


def test_a_packed_step_srun_refuses_to_start_is_retried_alone_not_given_up(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the first step of the pack asks for more memory than its job holds (adapters/faults.py): srun
    # refuses to create it on any site, and sacct has no line for it
    monkeypatch.setenv("CAMPAIGNCTL_FAULT", "step_launch")  # sbatch exports it to the job
    name = f"pack-launch-{uuid.uuid4().hex[:6]}"
    assert cli("submit", str(write_spec(tmp_path, f"""\
name: {name}
command: [python3, -c, "print('ran', {{i}})"]
matrix: {{i: [0, 1]}}
resources: {{cpus_per_task: 1, mem: 100M, time: "00:05:00"}}
telemetry: {{interval: 0}}
pack: {{per_job: 2}}
""", f"{name}.yaml"))).returncode == 0
    ticking_until_finished(name, timeout_s=240)
    rows = sorted(history(name), key=lambda r: (r.task_index, r.attempt_number))
    assert [(r.task_index, r.attempt_number, r.state) for r in rows] == [
        (0, 1, "FAILED"), (0, 2, "COMPLETED"), (1, 1, "COMPLETED")], [(r.task_index, r.state, r.evidence) for r in rows]
    refused = rows[0]
    assert refused.cause == "launch_failed" and "Memory required by task is not available" in refused.evidence
    log = (tmp_path / "runs" / name / "tasks" / "0" / refused.token / "output.log").read_text()
    assert log.startswith("campaignctl: the task's step did not start: srun: error: Unable to create step"), log
    answered = [(e.rule, e.action) for e in logged(name) if e.attempt_token == refused.token]
    assert ("launch_failed", "resubmit") in answered and not any(a == "give_up" for _, a in answered), answered
    assert rows[1].job_id and rows[1].job_id.partition("_")[0] != (refused.job_id or "").partition("_")[0]


def test_a_pack_no_node_of_the_lab_can_hold_is_refused_with_the_numbers(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    # the lab's nodes have 2 CPUs (sinfo): 4 tasks of 1 CPU to a job cannot start anywhere
    path = write_spec(tmp_path, """\
name: pack-toobig
command: [python3, -c, "pass", "{i}"]
matrix: {i: [0, 1, 2, 3]}
resources: {gpus: 1, cpus_per_task: 1, mem: 100M, time: "00:05:00"}
pack: {per_gpu: 4}
""", "toobig.yaml")
    why = "asks 4 CPUs (4 tasks × cpus_per_task 1) where the largest node has 2: set pack.cpus to at most 2"
    dry = cli("submit", str(path), "--dry-run")
    assert dry.returncode == 0 and why in dry.stdout, dry.stdout
    refused = cli("submit", str(path))
    assert refused.returncode == 3 and why in refused.stderr and "nothing was submitted" in refused.stderr
    assert cli("status", "pack-toobig").returncode == 4  # nothing recorded
