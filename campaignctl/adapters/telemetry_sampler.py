"""Job-side telemetry sampler: a daemon thread beside the task that appends JSON lines to
`<attempt_dir>/telemetry.jsonl` (one `write()` per line, so a reader sees half a line only after
a crash) until the runner stops it after the program exits.

    {"event": "start", "t": 1717000000.0, "interval_s": 10.0, "nvml": "ok", "gpus": [0, 1]}
    {"t": 1717000010.0, "cpu_pct": 187.3, "cpu_sys_pct": 12.0, "rss_mb": 2048.5, "nproc": 5,
     "cgroup_mem_peak_mb": 1830.2, "cgroup_mem_ws_mb": 1702.0, "io_read_mb": 512.0, "io_write_mb": 0.3,
     "io_disk_read_mb": 0.0, "io_disk_write_mb": 0.1, "node_net_rx_mb": 880.2, "node_net_tx_mb": 879.9,
     "gpus": [{"index": 0, "util_pct": 97, "mem_used_mb": 30120.0, "mem_total_mb": 40960.0, "power_w": 251.3,
               "pcie_tx_kbs": 1200.0, "pcie_rx_kbs": 35100.0, "nvlink_tx_mb": 2048.0, "nvlink_rx_mb": 2047.5}]}
    {"event": "end", "t": 1717000020.0, "samples": 2}

`cpu_pct` is % of ONE core summed over the task's process tree over the interval (so 4 busy
workers read ~400), `cpu_sys_pct` the part of it spent in the kernel (system time: copying a
read's bytes, page faults); `io_*_mb` are the tree's I/O over the interval (ProcessTree.read):
`io_read_mb`/`io_write_mb` every read/write syscall's bytes (`rchar`/`wchar` of /proc/<pid>/io:
page cache, network filesystems, pipes and sockets included), `io_disk_*` what the storage layer
fetched or was sent (`read_bytes`/`write_bytes`, "accurate for block-backed filesystems", proc(5));
absent where no process's /proc/<pid>/io could be read. Memory is in MiB (2**20 bytes,
nvidia-smi's unit); a metric NVML refuses is null. Each GPU's interconnect (adapters/gpu_links.py):
`pcie_tx_kbs`/`pcie_rx_kbs` NVML's PCIe throughput over its own 20 ms window, KB/s;
`nvlink_tx_mb`/`nvlink_rx_mb` the NVLink payload since the previous sample, all links summed;
absent where NVML has none. `node_net_rx_mb`/`node_net_tx_mb` (a multi-node attempt's only) and
`node_lustre_read_mb`/`node_lustre_write_mb` (where a Lustre client's stats can be read) are the
node's counters over the interval, every job on it included (adapters/node_io.py).
`cgroup_mem_peak_mb` is the peak usage of the memory cgroup that enforces the task's Slurm limit
(adapters/cgroup_memory.py; the start line has that limit as `cgroup_mem_limit_mb`),
`cgroup_mem_ws_mb` its working set now (the usage less its inactive page cache); all absent
where no cgroup limits the task; on cgroup v2 `cgroup_io_read_mb`/`cgroup_io_write_mb` are the
block I/O charged to that cgroup over the interval (adapters/cgroup_io.py). Without NVML,
"nvml" holds the reason (also written once to output.log) and "gpus" is [].
The last sample is taken after the program has exited and been reaped, so it usually reads
nproc 0 (nothing left to measure); a reader should not count it as an idle interval.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import NamedTuple

import psutil

from campaignctl.adapters.cgroup_io import CgroupIO, locate_io
from campaignctl.adapters.cgroup_memory import CgroupMemory, locate
from campaignctl.adapters.gpu_probe import MIB, GpuProbe, open_gpus
from campaignctl.adapters.node_io import NodeIO
from campaignctl.adapters.process_tree import descendants

# A process can exit (or become a zombie) between `children()` and the reads: its last interval
# is lost, not an error. ZombieProcess is a subclass of NoSuchProcess.
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied)

Note = Callable[[str], object]


class TreeReading(NamedTuple):
    cpu_s: float  # CPU seconds since the last read, user + system
    cpu_sys_s: float  # of them, system (kernel) seconds
    rss: float  # bytes, summed over the tree
    nproc: int  # processes measured
    io: tuple[int, int, int, int] | None  # bytes since the last read: rchar, wchar, read_bytes, write_bytes


class ProcessTree:
    """CPU seconds, RSS and I/O of a process and all its descendants, read repeatedly.

    psutil.Process objects are kept by pid between reads with their last CPU total; equality
    of Process compares (pid, create time), so a reused pid counts as a new process.

    I/O is counted by the tree's total, not per process: when a parent reaps a child, Linux adds
    the child's counters to the parent's /proc/<pid>/io (wait_task_zombie, kernel/exit.c), so a
    shell loop's short-lived `cat`s, born and reaped between two reads, still count — in their
    shell's figure. The total is compared with the highest seen so far: a child that is a zombie
    at one read (its counters unreadable) and reaped into its parent by the next is not counted
    twice. What an orphan re-parented out of the tree did after the last read is lost, as is its
    CPU time.
    """

    def __init__(self, root_pid: int) -> None:
        try:
            # Built right after Popen, before the runner reaps the child: at worst a zombie.
            self._root: psutil.Process | None = psutil.Process(root_pid)
        except _GONE:
            self._root = None
        self._known: dict[int, tuple[psutil.Process, float, float]] = {}
        self._io_high: tuple[int, int, int, int] | None = None

    def read(self) -> TreeReading:
        """The tree's use since the last read (the first read: since each process started)."""
        cpu_s, sys_s, rss, known = 0.0, 0.0, 0.0, {}
        io_total: list[int] | None = None
        for member in self._members():
            proc, before, before_sys = self._previous(member)
            measured = _measure(proc)
            if measured is None:
                continue
            total, system, proc_rss, io = measured
            cpu_s += max(0.0, total - before)
            sys_s += max(0.0, system - before_sys)
            rss += proc_rss
            known[proc.pid] = (proc, total, system)
            if io is not None:
                io_total = [a + b for a, b in zip(io_total, io, strict=True)] if io_total else list(io)
        self._known = known
        return TreeReading(cpu_s, sys_s, rss, len(known), self._io_since(io_total))

    @property
    def pids(self) -> Collection[int]:
        """The processes measured at the last read."""
        return self._known.keys()

    def _io_since(self, total: list[int] | None) -> tuple[int, int, int, int] | None:
        if total is None:
            return None
        high = self._io_high or (0, 0, 0, 0)
        self._io_high = (total[0], total[1], total[2], total[3]) if self._io_high is None else \
            (max(high[0], total[0]), max(high[1], total[1]), max(high[2], total[2]), max(high[3], total[3]))
        return (max(0, total[0] - high[0]), max(0, total[1] - high[1]), max(0, total[2] - high[2]),
                max(0, total[3] - high[3]))

    def _previous(self, proc: psutil.Process) -> tuple[psutil.Process, float, float]:
        """The cached Process and its CPU totals at the last read; (proc, 0.0, 0.0) for a new
        process, whose whole CPU time falls in this interval (it was not there at the last read)."""
        cached = self._known.get(proc.pid)
        return cached if cached is not None and cached[0] == proc else (proc, 0.0, 0.0)

    def _members(self) -> list[psutil.Process]:
        if self._root is None:
            return []
        return [self._root, *descendants(self._root)]  # adapters/process_tree.py: the sampler's main cost


def _measure(proc: psutil.Process) -> tuple[float, float, float, tuple[int, int, int, int] | None] | None:
    """(CPU seconds, of them system, RSS bytes, I/O counters or None) of one process; None when it is gone."""
    # No proc.oneshot(): on Linux cpu_times reads /proc/<pid>/stat, memory_info /proc/<pid>/statm and
    # io_counters /proc/<pid>/io, so there is nothing to share and the context manager only adds its own cost.
    try:
        times = proc.cpu_times()
        # Summed RSS counts pages shared by forked workers once per process (PSS from
        # /proc/<pid>/smaps would not, at ~100x the read cost), so it can exceed the cgroup figure.
        rss = float(proc.memory_info().rss)
    except _GONE:
        return None
    return times.user + times.system, times.system, rss, _io_counters(proc)


def _io_counters(proc: psutil.Process) -> tuple[int, int, int, int] | None:
    """rchar, wchar, read_bytes, write_bytes of /proc/<pid>/io; None where it cannot be read: the
    file needs ptrace-read access (a setuid program's, with hidepid or a Yama scope, is refused
    even to its user) and a kernel without CONFIG_TASK_IO_ACCOUNTING has none."""
    try:
        io = proc.io_counters()
    except (*_GONE, AttributeError, NotImplementedError, OSError):
        return None
    return io.read_chars, io.write_chars, io.read_bytes, io.write_bytes


class TelemetrySampler:
    """Samples a task's process tree (and its GPUs when NVML works) every `interval_s` seconds.

    `note` receives the one-line messages meant for the task log (GPU telemetry off, sampler
    stopped by an error). Nothing here raises into the task: any failure ends the sampler only.
    """

    def __init__(self, path: Path, root_pid: int, interval_s: float, *,
                 cuda_visible: str | None, note: Note = lambda _text: None, node: str = "",
                 own_cgroup: bool = True, interfaces: Collection[str] | None = None) -> None:
        self.path = path
        # False: the memory cgroup above the task is not its own (a plain-process pack's element
        # holds the tasks running at once): its figures would be theirs together, so none are read
        self.own_cgroup = own_cgroup
        self.node = node  # a multi-node attempt's node, named in the start line
        # a multi-node attempt's network interfaces (adapters/node_io.py; None: no network read)
        self.interfaces = interfaces
        self.interval_s = float(interval_s)
        self.samples = 0
        self.setup_cpu_s = 0.0  # the sampler thread's own CPU: NVML init + baseline read
        self.thread_cpu_s = 0.0  # the sampler thread's own CPU, in all
        self._cuda_visible = cuda_visible
        self._note = note
        self._tree = ProcessTree(root_pid)
        self._cgroup: CgroupMemory | None = None
        self._node_io: NodeIO | None = None
        self._cgroup_io: CgroupIO | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="campaignctl-telemetry", daemon=True)

    def start(self) -> TelemetrySampler:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Take the final sample, write the end line, wait for the thread (bounded: a hung NVML
        call must not keep the job alive; the daemon thread then dies with the process)."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        started = time.thread_time()
        try:
            with open(self.path, "ab", buffering=0) as out:
                self._sample_until_stopped(out.write, started)
        except Exception as exc:  # the task must outlive its sampler
            with contextlib.suppress(Exception):  # the log itself may be the failure
                self._note(f"campaignctl: telemetry stopped: {exc!r}\n")
        finally:
            self.thread_cpu_s = time.thread_time() - started

    def _sample_until_stopped(self, write: Callable[[bytes], object], started: float) -> None:
        gpus, status = open_gpus(self._cuda_visible)
        if gpus is None:
            self._note(f"campaignctl: GPU telemetry off: {status}\n")
        self._cgroup = locate() if self.own_cgroup else None
        self._cgroup_io = locate_io(self._cgroup.directory, self._cgroup.version) if self._cgroup else None
        limit = {"cgroup_mem_limit_mb": round(self._cgroup.limit_bytes / MIB, 1)} if self._cgroup else {}
        try:
            _write_line(write, {"event": "start", "t": time.time(), "interval_s": self.interval_s,
                                "nvml": status, "gpus": gpus.indices if gpus else [], **limit,
                                **({"node": self.node} if self.node else {})})
            self._node_io = NodeIO(self.interfaces)
            self._tree.read()  # baseline for the first interval's CPU and I/O deltas
            self._node_io.read()
            if self._cgroup_io:
                self._cgroup_io.read()
            self.setup_cpu_s = time.thread_time() - started
            self._loop(write, gpus)
            _write_line(write, {"event": "end", "t": time.time(), "samples": self.samples})
        finally:
            if gpus is not None:
                gpus.close()

    def _loop(self, write: Callable[[bytes], object], gpus: GpuProbe | None) -> None:
        last = time.monotonic()
        deadline = last + self.interval_s
        while not self._stop.wait(max(0.0, deadline - time.monotonic())):
            last = self._take_sample(write, gpus, last)
            deadline = _next_deadline(deadline, self.interval_s, time.monotonic())
        self._take_sample(write, gpus, last)  # final sample, after the program exited

    def _take_sample(self, write: Callable[[bytes], object], gpus: GpuProbe | None, last: float) -> float:
        now = time.monotonic()
        tree = self._tree.read()
        wall_s = max(now - last, 1e-6)
        peak = self._cgroup.peak_bytes() if self._cgroup else None
        working = self._cgroup.working_set_bytes() if self._cgroup else None
        block = self._cgroup_io.read() if self._cgroup_io else None
        _write_line(write, {"t": time.time(), "cpu_pct": round(100.0 * tree.cpu_s / wall_s, 1),
                            "cpu_sys_pct": round(100.0 * tree.cpu_sys_s / wall_s, 1),
                            "rss_mb": round(tree.rss / MIB, 1), "nproc": tree.nproc,
                            **({} if peak is None else {"cgroup_mem_peak_mb": round(peak / MIB, 1)}),
                            **({} if working is None else {"cgroup_mem_ws_mb": round(working / MIB, 1)}),
                            **({} if block is None else {"cgroup_io_read_mb": round(block[0] / MIB, 3),
                                                         "cgroup_io_write_mb": round(block[1] / MIB, 3)}),
                            **_io_fields(tree.io), **(self._node_io.read() if self._node_io else {}),
                            "gpus": gpus.read(self._tree.pids) if gpus else []})
        self.samples += 1
        return now


def _io_fields(io: tuple[int, int, int, int] | None) -> dict[str, float]:
    if io is None:
        return {}
    names = ("io_read_mb", "io_write_mb", "io_disk_read_mb", "io_disk_write_mb")
    return {name: round(value / MIB, 3) for name, value in zip(names, io, strict=True)}


def _next_deadline(deadline: float, interval_s: float, now: float) -> float:
    """A fixed cadence (the time a sample takes does not drift it), but after a stall longer
    than the interval (a slow NVML call, a stopped process) the next sample is one interval
    away, not a burst of catch-up samples."""
    deadline += interval_s
    return deadline if deadline > now else now + interval_s


def _write_line(write: Callable[[bytes], object], record: dict[str, object]) -> None:
    # The file is unbuffered: one write() per line, appended (O_APPEND) whole.
    write((json.dumps(record) + "\n").encode())
