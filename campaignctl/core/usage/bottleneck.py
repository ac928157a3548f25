"""What held an attempt back, from its telemetry: one label and the figures that gave it. Pure.

The labels, tried in this order (the first whose test holds wins):

- memory: the task's own memory (the sampler's summed RSS; not sacct's MaxRSS, which counts page
  cache on some sites) reached MEMORY_SHARE of what it was allocated. RSS, not the cgroup's peak: the cgroup counts
  page cache, which the kernel reclaims before it kills, so a task that streams a large file
  fills its cgroup without being short of memory.
- io: it moved at least IO_MBPS through read/write syscalls (page cache, network filesystems and
  pipes included: adapters/telemetry_sampler.py), and what it was given to compute with was not
  kept busy: a GPU task's GPUs under BUSY_SHARE utilised; a CPU task's cores under BUSY_SHARE
  used, or more of its CPU time spent in the kernel (copying the bytes it reads) than in its own
  code.
- idle: its CPU use under IDLE_CPU_PCT of one core, its GPUs (if any) under IDLE_GPU_PCT, and
  under IDLE_IO_MBPS of I/O: it held its allocation and did nothing with it.
- compute: anything else that ran: its time went to its own code on its CPUs or GPUs.
- communication: its GPUs moved at least NVLINK_MBPS over NVLink (NVML's payload counters,
  adapters/gpu_links.py) while under BUSY_SHARE utilised: they waited on each other. Or, a
  multi-node attempt: its first node's network interfaces (adapters/node_io.py) moved at least
  NET_MBPS while what it computes with was not kept busy, as io says. Tried before io: the ranks'
  socket reads and writes are syscalls, which the io figure counts too.

None where the sampler left no sample (no telemetry: a job run without it, or still pending).
"""

from __future__ import annotations

from dataclasses import dataclass

from campaignctl.core.usage.telemetry import Summary

MEMORY_SHARE = 0.9
IO_MBPS = 20.0  # MiB/s read + written, over the attempt
BUSY_SHARE = 0.5
IDLE_CPU_PCT = 10.0  # % of one core, summed over the task's processes
IDLE_GPU_PCT = 5.0
IDLE_IO_MBPS = 1.0
NVLINK_MBPS = 1000.0  # MiB/s sent + received over NVLink by the task's GPUs, over the attempt
NET_MBPS = 100.0  # MiB/s received + sent by a multi-node attempt's node (0.8 Gbit/s), over the attempt

LABELS = ("compute", "io", "communication", "memory", "idle")


@dataclass(frozen=True, slots=True)
class Bottleneck:
    label: str  # one of LABELS
    why: str  # the figures and the threshold that decided it


def bottleneck(t: Summary | None, cores: float, mem_mb: float, gpus: float,
               rss_peak_mb: float | None) -> Bottleneck | None:
    """The label of an attempt allocated `cores`, `mem_mb` and `gpus`, whose telemetry is `t`."""
    if t is None or not t.samples or t.cpu_mean is None:
        return None
    cpu = t.cpu_mean
    util = t.gpu_util_mean if gpus > 0 else None
    io = t.io_mbps
    if rss_peak_mb is not None and mem_mb > 0 and rss_peak_mb >= MEMORY_SHARE * mem_mb:
        return Bottleneck("memory", f"its processes' memory peaked at {rss_peak_mb:.0f} of {mem_mb:.0f} MB "
                                    f"(≥ {MEMORY_SHARE:.0%})")
    nvlink = t.nvlink_mbps
    if util is not None and util < 100 * BUSY_SHARE and nvlink is not None and nvlink >= NVLINK_MBPS:
        return Bottleneck("communication", f"{nvlink:.0f} MB/s over NVLink while its GPUs were {util:.0f} % "
                                           f"utilised (≥ {NVLINK_MBPS:g} MB/s, < {BUSY_SHARE:.0%})")
    waiting = _underused(t, cores, util)
    net = t.net_mbps
    if waiting and net is not None and net >= NET_MBPS:
        return Bottleneck("communication", f"{net:.0f} MB/s through its node's network while {waiting} "
                                           f"(≥ {NET_MBPS:g} MB/s)")
    if waiting and io is not None and io >= IO_MBPS:
        return Bottleneck("io", f"{io:.0f} MB/s of I/O while {waiting} (≥ {IO_MBPS:g} MB/s)")
    if cpu < IDLE_CPU_PCT and (util is None or util < IDLE_GPU_PCT) and (io is None or io < IDLE_IO_MBPS):
        gpu = f", GPUs {util:.0f} %" if util is not None else ""
        return Bottleneck("idle", f"{cpu:.1f} % of a core{gpu}, {io or 0:.1f} MB/s of I/O "
                                  f"(< {IDLE_CPU_PCT:g} %, < {IDLE_GPU_PCT:g} %, < {IDLE_IO_MBPS:g} MB/s)")
    gpu = f", GPUs {util:.0f} % utilised" if util is not None else ""
    return Bottleneck("compute", f"{cpu:.0f} % of a core on {cores:g} cores{gpu}"
                                 + (f", {io:.1f} MB/s of I/O" if io is not None else ""))


def _underused(t: Summary, cores: float, util: float | None) -> str:
    """Why what the attempt computes with was not kept busy ('' when it was): its GPUs under
    BUSY_SHARE utilised; without GPUs, its cores under BUSY_SHARE used or more of its CPU time in
    the kernel (copying the bytes it reads or sends) than in its own code."""
    if util is not None:
        return f"its GPUs were {util:.0f} % utilised (< {BUSY_SHARE:.0%})" if util < 100 * BUSY_SHARE else ""
    cpu, kernel = t.cpu_mean or 0.0, t.cpu_sys_mean
    if cores <= 0 or not (cpu < 100 * BUSY_SHARE * cores or (kernel is not None and kernel * 2 > cpu)):
        return ""
    used = f"{cpu:.0f} % of a core" + (f", {kernel:.0f} of it in the kernel" if kernel is not None else "")
    return f"it used {used} of {cores:g} cores (under {BUSY_SHARE:.0%}, or mostly in the kernel)"
