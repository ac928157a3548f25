"""The block I/O the kernel charges to a task's cgroup, beside what its processes' own counters
say (adapters/telemetry_sampler.py): bytes the storage devices read and wrote for the cgroup,
written-back page cache and processes that already exited included.

cgroup v2: `io.stat` in the step's cgroup (the one whose memory limit adapters/cgroup_memory.py
finds), one line per device, `MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N`
(Documentation/admin-guide/cgroup-v2.rst), present when the io controller is enabled for the
subtree (Slurm enables the controllers slurmd's cgroup has). Network filesystems (NFS, Lustre)
are not block devices and never appear in it: their bytes are in the syscall counters.
cgroup v1: blkio is a hierarchy of its own, which Slurm's task/cgroup does not join (it uses
cpuset, memory and devices): a job's processes sit in slurmd's blkio cgroup, with every other
job's, so nothing is read.
"""

from __future__ import annotations

from pathlib import Path


def io_stat_bytes(text: str) -> tuple[int, int]:
    """(bytes read, bytes written) summed over the devices of an io.stat text."""
    read = written = 0
    for line in text.splitlines():
        for item in line.split()[1:]:
            key, _, value = item.partition("=")
            if key == "rbytes" and value.isdigit():
                read += int(value)
            elif key == "wbytes" and value.isdigit():
                written += int(value)
    return read, written


class CgroupIO:
    """io.stat of one v2 cgroup, read as deltas; a read that fails (the step's cgroup removed
    as it ended) is None."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / "io.stat"
        self._last: tuple[int, int] | None = None

    def read(self) -> tuple[int, int] | None:
        try:
            now = io_stat_bytes(self._path.read_text())
        except OSError:
            return None
        before = self._last or now
        self._last = now
        return max(0, now[0] - before[0]), max(0, now[1] - before[1])


def locate_io(directory: Path | None, version: str) -> CgroupIO | None:
    """The step's io counters on cgroup v2 where its io.stat exists; None on v1 or without."""
    if directory is None or version != "v2" or not (directory / "io.stat").exists():
        return None
    return CgroupIO(directory)
