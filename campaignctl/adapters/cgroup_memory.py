"""The memory cgroup that enforces a task's Slurm memory limit, and its peak usage: the same
quantity the limit is compared with, so a task that was never OOM-killed reads at most 100 %.

Summed RSS over the process tree (the sampler's `rss_mb`, and sacct's MaxRSS under
jobacct_gather/linux) counts the pages forked workers share once per process and can exceed the
limit; the cgroup counts each page once, page cache included (the kernel reclaims that cache
before it kills, so a peak near 100 % without an OOM-kill is usually cache).

Slurm's task/cgroup (ConstrainRAMSpace=yes) sets the limit on the job's cgroup and on each step's:
- cgroup v1: `/proc/self/cgroup` has `N:memory:/slurm/uid_U/job_J/step_S`; under
  `/sys/fs/cgroup/memory<path>`: memory.limit_in_bytes (no limit: 2**63 rounded down to a page),
  memory.max_usage_in_bytes (the peak since the cgroup was made), memory.usage_in_bytes.
- cgroup v2: `0::<path>`, the process in a `task_N` leaf below the step with no limit of its own;
  under `/sys/fs/cgroup<path>`: memory.max (`max`: none), memory.peak (Linux 5.19 and later),
  memory.current.
So the reader walks up from the process's cgroup to the nearest one with a limit. Where none has
one (ConstrainRAMSpace=no, a login node), there is nothing to read: the caller falls back to RSS.

The working set is the usage less the page cache the kernel would drop first: `memory.stat`'s
inactive file pages (v1 `total_inactive_file`, the hierarchy's, as usage is; v2 `inactive_file`).
It is what Kubernetes evicts on and cAdvisor reports as working_set_bytes: anonymous memory,
shared memory (/dev/shm, which a data loader's tensors live in and RSS may not count), and the
file pages in active use (a file read again and again). A file read once fills the cgroup's usage
up to its limit, mostly inactive, adding little to it. The kernel keeps no high-water mark of it:
the sampler's highest reading is the figure, and a reading taken while a stream fills the cache
can find the kernel's lists behind it (139 MB of a 150M cgroup, once, under load, where 22 MB is
the quiet figure): an error on the side of more.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNLIMITED = 2**62  # v1 writes 9223372036854771712 for "no limit"


@dataclass(frozen=True, slots=True)
class _Files:
    limit: str
    peak: str  # the kernel's own high-water mark; absent on v2 before Linux 5.19
    current: str
    events: str  # its `oom_kill N` line: processes the kernel's OOM killer ended in this cgroup
    inactive_file: str  # memory.stat's key for the inactive page cache of the whole subtree


# v1's memory.oom_control has `oom_kill` since Linux 4.13; v2's memory.events always
_V1 = _Files("memory.limit_in_bytes", "memory.max_usage_in_bytes", "memory.usage_in_bytes", "memory.oom_control",
             "total_inactive_file")
_V2 = _Files("memory.max", "memory.peak", "memory.current", "memory.events", "inactive_file")


def own_cgroup(proc_self_cgroup: str) -> tuple[str, str] | None:
    """("v1" | "v2", path) of the memory controller in the text of /proc/self/cgroup; None when
    there is no memory controller. A v1 line names its controllers; the v2 line is `0::path`."""
    unified = None
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "memory" in controllers.split(","):
            return "v1", path
        if parts[0] == "0" and controllers == "":
            unified = path
    return None if unified is None else ("v2", unified)


class CgroupMemory:
    """The limit and peak of one memory cgroup. Reads never raise: a cgroup removed under the
    reader (the step ended) reads as no new figure."""

    def __init__(self, directory: Path, files: _Files, limit_bytes: int) -> None:
        self.directory = directory
        self.version = "v1" if files is _V1 else "v2"
        self.limit_bytes = limit_bytes
        self._files = files
        self._peak = 0

    def peak_bytes(self) -> int | None:
        """The highest usage so far: the kernel's high-water mark where it keeps one, else the
        highest usage this reader has seen (a lower bound: it samples)."""
        for name in (self._files.peak, self._files.current):
            value = _read_int(self.directory / name)
            if value is not None:
                self._peak = max(self._peak, value)
                return self._peak
        return self._peak or None

    def working_set_bytes(self) -> int | None:
        """The usage now less its inactive page cache; None where either cannot be read."""
        usage = _read_int(self.directory / self._files.current)
        inactive = _keyed(self.directory / "memory.stat", self._files.inactive_file)
        return None if usage is None or inactive is None else max(0, usage - inactive)

    def oom_kills(self) -> int | None:
        """Processes the kernel's OOM killer has ended in this cgroup, or None where unreadable."""
        return _keyed(self.directory / self._files.events, "oom_kill")


def locate(proc_self_cgroup: str | None = None, root: Path = CGROUP_ROOT) -> CgroupMemory | None:
    """The nearest cgroup at or above this process's own that has a memory limit; None without."""
    if proc_self_cgroup is None:
        try:
            proc_self_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    found = own_cgroup(proc_self_cgroup)
    if found is None:
        return None
    version, path = found
    base, files = (root / "memory", _V1) if version == "v1" else (root, _V2)
    directory = base / path.lstrip("/")
    while True:
        limit = _read_int(directory / files.limit)
        if limit is not None and limit < _UNLIMITED:
            return CgroupMemory(directory, files, limit)
        if directory == base or base not in directory.parents:
            return None
        directory = directory.parent


def _keyed(path: Path, key: str) -> int | None:
    """The value of a `key value` line of a cgroup file (memory.stat, memory.events)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # v2's "max" is no limit
