"""Block I/O charged to a task's cgroup: io.stat on cgroup v2, in Slurm's cgroup/v2 layout
(tests/adapters/test_cgroup_memory.py); nothing on v1, whose blkio hierarchy is not the job's.
The io.stat lines are the kernel documentation's example (Documentation/admin-guide/
cgroup-v2.rst, "io.stat"); this machine and the lab run cgroup v1, so no real v2 kernel is read."""

from __future__ import annotations

from pathlib import Path

from campaignctl.adapters.cgroup_io import io_stat_bytes, locate_io
from campaignctl.adapters.cgroup_memory import locate
from tests.adapters.test_cgroup_memory import V1_SELF, V2_SELF, files

KERNEL_DOC = """\
8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0
8:0 rbytes=90430464 wbytes=299008000 rios=8950 wios=1252 dbytes=50331648 dios=3021
"""


def test_io_stat_is_summed_over_devices() -> None:
    assert io_stat_bytes(KERNEL_DOC) == (1459200 + 90430464, 314773504 + 299008000)
    assert io_stat_bytes("") == (0, 0)  # no device touched yet: an empty file


def test_v2_reads_the_step_cgroups_io_stat_as_deltas_and_v1_reads_nothing(tmp_path: Path) -> None:
    job = tmp_path / "system.slice/slurmstepd.scope/job_77"
    files(job / "step_0/user/task_0", memory_max="max")
    files(job / "step_0/user", memory_max="max")
    files(job / "step_0", memory_max="1073741824", memory_current="5000")
    (job / "step_0" / "io.stat").write_text(KERNEL_DOC)
    memory = locate(V2_SELF, tmp_path)
    assert memory is not None and memory.version == "v2"
    found = locate_io(memory.directory, memory.version)
    assert found is not None and found.read() == (0, 0)  # the baseline
    (job / "step_0" / "io.stat").write_text(KERNEL_DOC.replace("rbytes=1459200", f"rbytes={1459200 + 2**20}"))
    assert found.read() == (2**20, 0)
    (job / "step_0" / "io.stat").unlink()  # the step ended under the reader
    assert found.read() is None
    v1 = tmp_path / "v1"
    step = v1 / "memory/slurm_node1/uid_0/job_9023/step_batch"
    files(step, memory_limit_in_bytes="209715200", memory_usage_in_bytes="4096")
    (step / "io.stat").write_text(KERNEL_DOC)  # never there on v1; even so not read
    on_v1 = locate(V1_SELF, v1)
    assert on_v1 is not None and locate_io(on_v1.directory, on_v1.version) is None
