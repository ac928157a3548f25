"""Finding the memory cgroup that enforces a task's limit, in trees laid out as Slurm makes them.

The v1 layout is the lab's (a job's `/proc/self/cgroup` line and files read on node1, Slurm 22.05,
cgroup/v1): the task in `task_0` with the v1 "no limit" value, `step_batch` limited to 200M. The
v2 layout is Slurm's cgroup/v2 one (slurm.schedmd.com/cgroup_v2.html): `task_0` below the step
with `memory.max` "max".
"""

from __future__ import annotations

from pathlib import Path

from campaignctl.adapters.cgroup_memory import locate, own_cgroup

V1_SELF = """\
12:pids:/slurm_node1/uid_0/job_9023/step_batch/task_0
4:memory:/slurm_node1/uid_0/job_9023/step_batch/task_0
2:cpu,cpuacct:/slurm_node1/uid_0/job_9023/step_batch/task_0
1:name=systemd:/
"""
V2_SELF = "0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_0\n"


def files(directory: Path, **values: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in values.items():
        (directory / name.replace("_", ".", 1)).write_text(value + "\n")
    return directory


def test_v1_walks_up_from_the_unlimited_task_leaf_to_the_limited_step(tmp_path: Path) -> None:
    step = tmp_path / "memory/slurm_node1/uid_0/job_9023/step_batch"
    files(step / "task_0", memory_limit_in_bytes="9223372036854771712", memory_max_usage_in_bytes="1519616")
    files(step, memory_limit_in_bytes="209715200", memory_max_usage_in_bytes="2150400", memory_usage_in_bytes="4096")
    found = locate(V1_SELF, tmp_path)
    assert found is not None and found.directory == step and found.limit_bytes == 200 * 2**20
    assert found.peak_bytes() == 2150400  # the kernel's high-water mark, not the usage now


def test_v2_reads_memory_peak_and_falls_back_to_the_highest_current_seen(tmp_path: Path) -> None:
    job = tmp_path / "system.slice/slurmstepd.scope/job_77"
    files(job / "step_0/user/task_0", memory_max="max", memory_current="100")
    files(job / "step_0/user", memory_max="max")
    files(job / "step_0", memory_max="max")
    files(job, memory_max="1073741824", memory_current="5000")
    found = locate(V2_SELF, tmp_path)
    assert found is not None and found.directory == job and found.limit_bytes == 2**30
    assert found.peak_bytes() == 5000  # no memory.peak before Linux 5.19: memory.current
    (job / "memory.current").write_text("3000\n")
    assert found.peak_bytes() == 5000  # the highest seen, not the latest
    (job / "memory.peak").write_text("9000\n")
    assert found.peak_bytes() == 9000


def test_no_limit_anywhere_or_no_memory_controller_reads_nothing(tmp_path: Path) -> None:
    files(tmp_path / "memory/slurm_node1/uid_0/job_9023/step_batch/task_0",
          memory_limit_in_bytes="9223372036854771712")
    assert locate(V1_SELF, tmp_path) is None  # ConstrainRAMSpace=no: there is no limit to compare with
    assert locate("1:name=systemd:/\n", tmp_path) is None
    assert own_cgroup("garbage") is None


def test_a_cgroup_removed_under_the_reader_keeps_the_peak_it_read(tmp_path: Path) -> None:
    step = files(tmp_path / "memory/slurm_node1/uid_0/job_9023/step_batch/task_0",
                 memory_limit_in_bytes="209715200", memory_max_usage_in_bytes="777")
    found = locate(V1_SELF, tmp_path)
    assert found is not None and found.peak_bytes() == 777
    for child in step.iterdir():
        child.unlink()
    assert found.peak_bytes() == 777  # the step ended and Slurm removed its cgroup


# lines of a v1 memory.stat in the kernel's format and order (taken from this machine's
# /sys/fs/cgroup/memory/memory.stat, cgroup v1, 2026-12-01; the total_* values set for a 150M cgroup)
V1_STAT = """\
cache 11395072
rss 3219456
inactive_file 352256
active_file 1974272
hierarchical_memory_limit 157286400
total_cache 146800640
total_rss 14450688
total_inactive_file 125829120
total_active_file 8388608
"""


def test_the_working_set_is_the_usage_less_the_subtree_s_inactive_page_cache(tmp_path: Path) -> None:
    step = tmp_path / "memory/slurm_node1/uid_0/job_9023/step_batch"
    files(step / "task_0", memory_limit_in_bytes="9223372036854771712")
    files(step, memory_limit_in_bytes="157286400", memory_max_usage_in_bytes="154337280",
          memory_usage_in_bytes="150994944")
    (step / "memory.stat").write_text(V1_STAT)
    found = locate(V1_SELF, tmp_path)
    assert found is not None and found.working_set_bytes() == 150994944 - 125829120  # total_, not the cgroup's own
    job = tmp_path / "system.slice/slurmstepd.scope/job_77"
    files(job / "step_0/user/task_0", memory_max="max")
    files(job, memory_max="1073741824", memory_current="5000000")
    v2 = locate(V2_SELF, tmp_path)
    assert v2 is not None and v2.working_set_bytes() is None  # no memory.stat: no figure, no error
    (job / "memory.stat").write_text("anon 1000000\nfile 4000000\nactive_file 1000000\ninactive_file 3000000\n")
    assert v2.working_set_bytes() == 2000000
