"""Telemetry lines (written by the job-side sampler into `<attempt dir>/telemetry.jsonl`) →
per-attempt summaries. Pure: the reader hands in complete lines; summaries fold incrementally,
so a tick only reads what was appended since the last one.

Line format (one JSON object per line):
  {"event": "start", "t": 1.7e9, "interval_s": 10, "nvml": "ok" | "<why not>", "gpus": [0]}
  {"t": 1.7e9, "cpu_pct": 187.5, "cpu_sys_pct": 9.5, "rss_mb": 2048.0, "nproc": 3, "cgroup_mem_peak_mb": 1830.2,
   "cgroup_mem_ws_mb": 1702.0,
   "io_read_mb": 51.2, "io_write_mb": 0.1, "io_disk_read_mb": 0.0, "io_disk_write_mb": 0.0,
   "gpus": [{"index": 0, "util_pct": 35, "mem_used_mb": 1.2e4, "mem_total_mb": 4.0e4, "power_w": 180.0,
             "proc_mem_mb": 1.1e4}]}
  {"event": "end", "t": 1.7e9, "samples": 42}
(each node of a multi-node attempt writes such a file; the attempt's summary folds the first
node's, core/usage/node_telemetry.py the others for the report: `net_mbps` is that node's)

A task's GPU memory is what its own processes hold (`proc_mem_mb`, from NVML's list of compute
processes) where the sampler could read it, else the device's: on a GPU that packed tasks share,
the device's figure is all of theirs. I/O (adapters/telemetry_sampler.py says what each counter
counts) is summed over the samples that carry it, with the seconds they cover: a rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from campaignctl.core.base import bounded_json
from campaignctl.core.usage.energy import Reading, gpu_powers, integrate

WINDOW_KEEP = 120  # recent samples kept per attempt for windowed rules (20 min at 10 s)


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    cpu_pct: float
    rss_mb: float
    gpu_util_pct: float | None  # mean over the task's GPUs; None without GPU telemetry
    gpu_mem_mb: float | None  # sum over the task's GPUs
    gpu_mem_total_mb: float | None = None  # their capacity (NVML memory.total), summed


@dataclass(frozen=True, slots=True)
class Summary:
    """Everything read so far for one attempt. Means are kept as sums so a tick can add to them."""

    samples: int = 0
    first_t: float | None = None
    last_t: float | None = None
    cpu_sum: float = 0.0
    cpu_max: float = 0.0
    rss_max_mb: float = 0.0
    cgroup_mem_peak_mb: float = 0.0  # peak of the memory cgroup enforcing the limit (0: not reported)
    cgroup_ws_peak_mb: float = 0.0  # the highest working set of that cgroup sampled (usage less inactive cache)
    gpu_samples: int = 0
    gpu_util_sum: float = 0.0
    gpu_util_max: float = 0.0
    gpu_mem_max_mb: float = 0.0
    gpu_mem_total_mb: float = 0.0  # capacity of the task's GPUs (0: not reported)
    nvml: str = ""  # "ok", or why there is no GPU telemetry
    ended: bool = False
    bad_lines: int = 0
    recent: tuple[Sample, ...] = field(default_factory=tuple)
    interval_s: float = 0.0  # the sampler's, from its start line (0: not seen)
    gpu_energy_j: float = 0.0  # NVML power integrated per GPU (core/usage/energy.py)
    energy_gap_s: float = 0.0  # seconds between readings too far apart to integrate
    power_last: tuple[Reading, ...] = ()  # each GPU's last reading: where the next tick goes on
    cpu_sys_sum: float = 0.0  # the kernel's part of cpu_sum, over cpu_sys_samples samples
    cpu_sys_samples: int = 0
    io_read_mb: float = 0.0  # read/write syscalls' bytes (rchar, wchar) ...
    io_write_mb: float = 0.0
    io_disk_read_mb: float = 0.0  # ... and the storage layer's (read_bytes, write_bytes)
    io_disk_write_mb: float = 0.0
    io_s: float = 0.0  # seconds the io_* sums cover (0: no sample carried I/O)
    pcie_kbs_sum: float = 0.0  # each sample's PCIe TX + RX over the task's GPUs (NVML KB/s), summed ...
    pcie_samples: int = 0  # ... over this many samples
    nvlink_mb: float = 0.0  # NVLink payload sent + received by the task's GPUs
    nvlink_s: float = 0.0  # the seconds nvlink_mb covers
    net_mb: float = 0.0  # a multi-node attempt's node's network bytes, received + sent
    net_s: float = 0.0  # the seconds net_mb covers
    lustre_mb: float = 0.0  # the node's Lustre client's bytes read + written
    lustre_s: float = 0.0
    cgroup_io_mb: float = 0.0  # block I/O charged to the task's cgroup (v2 io.stat), read + written
    cgroup_io_s: float = 0.0

    @property
    def cpu_mean(self) -> float | None:
        return self.cpu_sum / self.samples if self.samples else None

    @property
    def cpu_sys_mean(self) -> float | None:
        return self.cpu_sys_sum / self.cpu_sys_samples if self.cpu_sys_samples else None

    @property
    def io_mbps(self) -> float | None:
        """Syscall bytes read and written per second, MiB/s; None where no sample carried I/O."""
        return (self.io_read_mb + self.io_write_mb) / self.io_s if self.io_s > 0 else None

    @property
    def pcie_kbs_mean(self) -> float | None:
        return self.pcie_kbs_sum / self.pcie_samples if self.pcie_samples else None

    @property
    def nvlink_mbps(self) -> float | None:
        return self.nvlink_mb / self.nvlink_s if self.nvlink_s > 0 else None

    @property
    def net_mbps(self) -> float | None:
        """The node's network bytes per second, MiB/s; None where unread (not a multi-node attempt)."""
        return self.net_mb / self.net_s if self.net_s > 0 else None

    @property
    def lustre_mbps(self) -> float | None:
        return self.lustre_mb / self.lustre_s if self.lustre_s > 0 else None

    @property
    def gpu_util_mean(self) -> float | None:
        return self.gpu_util_sum / self.gpu_samples if self.gpu_samples else None

    def window(self, seconds: float) -> tuple[Sample, ...]:
        """The samples of the last `seconds` before the newest one."""
        if not self.recent:
            return ()
        start = self.recent[-1].t - seconds
        return tuple(s for s in self.recent if s.t >= start)


def parse_line(line: str) -> dict[str, object] | None:
    """The record of one line; None for a bad one (core/base/bounded_json.py: what a job could write
    to stop a reader, such as a 309-digit integer or `NaN`, is bad too)."""
    try:
        value = bounded_json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def to_sample(record: dict[str, object]) -> Sample | None:
    """None for a line that is not a sample, and for the sampler's last sample after the program
    was reaped (`nproc` 0): counting it would make every task look idle at the end."""
    t, cpu, rss = record.get("t"), record.get("cpu_pct"), record.get("rss_mb")
    if record.get("nproc") == 0:
        return None
    if not (isinstance(t, (int, float)) and isinstance(cpu, (int, float)) and isinstance(rss, (int, float))):
        return None
    listed = record.get("gpus")
    gpus = [g for g in listed if isinstance(g, dict)] if isinstance(listed, list) else []
    utils = [float(g["util_pct"]) for g in gpus if isinstance(g.get("util_pct"), (int, float))]
    mems = [float(m) for g in gpus if isinstance(m := g.get("proc_mem_mb", g.get("mem_used_mb")), (int, float))]
    totals = [float(g["mem_total_mb"]) for g in gpus if isinstance(g.get("mem_total_mb"), (int, float))]
    return Sample(float(t), float(cpu), float(rss),
                  sum(utils) / len(utils) if utils else None, sum(mems) if mems else None,
                  sum(totals) if totals else None)


def samples_of(lines: Iterable[str]) -> tuple[Sample, ...]:
    """Every sample in complete lines: what the report draws (events and bad lines left out)."""
    records = (parse_line(line) for line in lines)
    found = (to_sample(r) for r in records if r is not None and r.get("event") is None)
    return tuple(s for s in found if s is not None)


def fold(summary: Summary, lines: Iterable[str]) -> Summary:
    """Add complete lines to a summary. A line that is not a telemetry record counts as bad."""
    acc: dict[str, Any] = {f.name: getattr(summary, f.name) for f in fields(Summary)}
    recent = list(summary.recent)
    for line in lines:
        record = parse_line(line)
        event = record.get("event") if record is not None else None
        sample = to_sample(record) if record is not None and event is None else None
        if event == "start" and record is not None:
            _start(acc, record)
        elif event == "end":
            acc["ended"] = True
        elif event is None and record is not None and isinstance(record.get("t"), (int, float)):
            _add_energy(acc, record)  # the reading after the program was reaped too: the job held the GPUs
            _add_cgroup_peak(acc, record)  # so is the cgroup's peak: the kernel kept it
        if event in ("start", "end") or (record is not None and record.get("nproc") == 0):
            continue  # nproc 0: taken after the program was reaped, not an idle interval
        if sample is None:
            acc["bad_lines"] += 1
        else:
            _add(acc, sample)
            _add_io(acc, record)
            recent.append(sample)
    acc["recent"] = tuple(recent[-WINDOW_KEEP:])
    return Summary(**acc)


def _start(acc: dict[str, Any], record: dict[str, object]) -> None:
    interval = record.get("interval_s")
    acc["nvml"] = str(record.get("nvml", ""))
    acc["interval_s"] = float(interval) if isinstance(interval, (int, float)) else 0.0
    acc["power_last"] = ()  # the sampler started again: nothing is integrated across a restart


def _add_energy(acc: dict[str, Any], record: dict[str, object]) -> None:
    t = record.get("t")
    if not isinstance(t, (int, float)):
        return
    step = integrate(acc["power_last"], float(t), gpu_powers(record), acc["interval_s"])
    acc["gpu_energy_j"] += step.joules
    acc["energy_gap_s"] += step.gap_s
    acc["power_last"] = step.last


def _add_cgroup_peak(acc: dict[str, Any], record: dict[str, object]) -> None:
    for field_, stored in (("cgroup_mem_peak_mb", "cgroup_mem_peak_mb"), ("cgroup_mem_ws_mb", "cgroup_ws_peak_mb")):
        value = _number(record.get(field_))
        if value:
            acc[stored] = max(acc[stored], value)


_IO = ("io_read_mb", "io_write_mb", "io_disk_read_mb", "io_disk_write_mb")


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _add_io(acc: dict[str, Any], record: dict[str, Any] | None) -> None:
    """The kernel's CPU share and the I/O of one sample; a sample's I/O covers one interval."""
    if record is None:
        return
    system = _number(record.get("cpu_sys_pct"))
    if system is not None:
        acc["cpu_sys_sum"] += system
        acc["cpu_sys_samples"] += 1
    _add_links(acc, record)
    values = [_number(record.get(name)) for name in _IO]
    if all(v is None for v in values) or not acc["interval_s"]:
        return
    for name, value in zip(_IO, values, strict=True):
        acc[name] += value or 0.0
    acc["io_s"] += acc["interval_s"]


_COUNTED = (("net_mb", "net_s", ("node_net_rx_mb", "node_net_tx_mb")),
            ("lustre_mb", "lustre_s", ("node_lustre_read_mb", "node_lustre_write_mb")),
            ("cgroup_io_mb", "cgroup_io_s", ("cgroup_io_read_mb", "cgroup_io_write_mb")))


def _add_links(acc: dict[str, Any], record: dict[str, Any]) -> None:
    """The GPUs' interconnect in one sample (adapters/gpu_links.py), the node's network and
    Lustre counters (adapters/node_io.py) and the cgroup's block I/O (adapters/cgroup_io.py)."""
    for total, seconds, names in _COUNTED:
        values = [v for name in names if (v := _number(record.get(name))) is not None]
        if values and acc["interval_s"]:
            acc[total] += sum(values)
            acc[seconds] += acc["interval_s"]
    listed = record.get("gpus")
    gpus = [g for g in listed if isinstance(g, dict)] if isinstance(listed, list) else []
    pcie = [v for g in gpus for k in ("pcie_tx_kbs", "pcie_rx_kbs") if (v := _number(g.get(k))) is not None]
    if pcie:
        acc["pcie_kbs_sum"] += sum(pcie)
        acc["pcie_samples"] += 1
    nvlink = [v for g in gpus for k in ("nvlink_tx_mb", "nvlink_rx_mb") if (v := _number(g.get(k))) is not None]
    if nvlink and acc["interval_s"]:
        acc["nvlink_mb"] += sum(nvlink)
        acc["nvlink_s"] += acc["interval_s"]


def _add(acc: dict[str, Any], x: Sample) -> None:
    acc["samples"] += 1
    acc["first_t"] = x.t if acc["first_t"] is None else acc["first_t"]
    acc["last_t"] = x.t
    acc["cpu_sum"] += x.cpu_pct
    acc["cpu_max"] = max(acc["cpu_max"], x.cpu_pct)
    acc["rss_max_mb"] = max(acc["rss_max_mb"], x.rss_mb)
    if x.gpu_util_pct is not None:
        acc["gpu_samples"] += 1
        acc["gpu_util_sum"] += x.gpu_util_pct
        acc["gpu_util_max"] = max(acc["gpu_util_max"], x.gpu_util_pct)
    if x.gpu_mem_mb is not None:
        acc["gpu_mem_max_mb"] = max(acc["gpu_mem_max_mb"], x.gpu_mem_mb)
    if x.gpu_mem_total_mb is not None:
        acc["gpu_mem_total_mb"] = max(acc["gpu_mem_total_mb"], x.gpu_mem_total_mb)


def summary_to_dict(s: Summary) -> dict[str, object]:
    return {"samples": s.samples, "first_t": s.first_t, "last_t": s.last_t, "cpu_sum": s.cpu_sum,
            "cpu_max": s.cpu_max, "rss_max_mb": s.rss_max_mb, "cgroup_mem_peak_mb": s.cgroup_mem_peak_mb,
            "cgroup_ws_peak_mb": s.cgroup_ws_peak_mb,
            "gpu_samples": s.gpu_samples,
            "gpu_util_sum": s.gpu_util_sum, "gpu_util_max": s.gpu_util_max,
            "gpu_mem_max_mb": s.gpu_mem_max_mb, "gpu_mem_total_mb": s.gpu_mem_total_mb, "nvml": s.nvml,
            "ended": s.ended, "bad_lines": s.bad_lines, "interval_s": s.interval_s,
            "gpu_energy_j": s.gpu_energy_j, "energy_gap_s": s.energy_gap_s,
            "power_last": [list(r) for r in s.power_last],
            "cpu_sys_sum": s.cpu_sys_sum, "cpu_sys_samples": s.cpu_sys_samples, "io_read_mb": s.io_read_mb,
            "io_write_mb": s.io_write_mb, "io_disk_read_mb": s.io_disk_read_mb,
            "io_disk_write_mb": s.io_disk_write_mb, "io_s": s.io_s, "pcie_kbs_sum": s.pcie_kbs_sum,
            "pcie_samples": s.pcie_samples, "nvlink_mb": s.nvlink_mb, "nvlink_s": s.nvlink_s,
            "net_mb": s.net_mb, "net_s": s.net_s, "lustre_mb": s.lustre_mb, "lustre_s": s.lustre_s,
            "cgroup_io_mb": s.cgroup_io_mb, "cgroup_io_s": s.cgroup_io_s,
            "recent": [[x.t, x.cpu_pct, x.rss_mb, x.gpu_util_pct, x.gpu_mem_mb, x.gpu_mem_total_mb]
                       for x in s.recent]}


def summary_from_dict(d: dict[str, object]) -> Summary:
    """Also reads summaries stored before `gpu_mem_total_mb` existed (5-field samples), before
    energy (no `gpu_energy_j`: 0), before the cgroup peak (0: not reported) and before I/O (0 s)."""
    stored: dict[str, Any] = dict(d)  # the store's own JSON, written by summary_to_dict
    recent = tuple(Sample(*row) for row in stored.get("recent", []))
    last = tuple((int(i), float(t), float(w)) for i, t, w in stored.get("power_last", []))
    return Summary(**{**stored, "recent": recent, "power_last": last})
