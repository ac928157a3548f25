"""Counters a node keeps for everything running on it, read as their change over each sampler
interval: the bytes through its network interfaces, and its Lustre client's read and write bytes.
On a node the task holds alone (a multi-node task's nodes, usually) they are the task's; on a
shared node other jobs' bytes are in them, which is why the sampler's fields say `node_`.

Network, readable by any user:
- `/proc/net/dev`: per interface, received bytes (1st column after the name) and transmitted
  bytes (9th). It is the reading process's network namespace's view: on a node whose jobs share
  the host's namespace (Slurm's default), the node's.
- `/sys/class/infiniband/<dev>/ports/<n>/counters/port_rcv_data`, `port_xmit_data`: "octets,
  divided by 4 (lanes)" (Documentation/ABI/stable/sysfs-class-infiniband), 64-bit where the HCA
  has extended counters. RDMA traffic (NCCL, MPI over verbs) never passes the kernel's network
  stack, so /proc/net/dev does not see it; IP over InfiniBand (`ib0`, ARPHRD type 32) is counted
  by both, so with ports read the IPoIB interfaces are left out.
Which interfaces: those the spec names (`telemetry: {interfaces: [...]}`: an interface name, an
HCA `mlx5_0` for all its ports, or `mlx5_0:1`), else every interface backed by a device
(`/sys/class/net/<if>/device` exists: not lo, bridges, veth pairs or tunnels, whose bytes are a
real interface's bytes again) and every InfiniBand port.

Lustre: `llite.<fs>-<id>.stats` has `read_bytes N samples [bytes] MIN MAX SUM [SUMSQ]` and the
same for `write_bytes`: the bytes of the read()/write() calls on that mount (VFS level, served
from cache or not). Lustre up to 2.11 keeps it under /proc/fs/lustre (world-readable); later
releases under /sys/kernel/debug/lustre, which is root's only where debugfs is mounted 0700
(the default): a user then gets no Lustre figure, and the syscall counters (`io_read_mb`) still
count the task's own Lustre reads.

A file that cannot be read is left out, at every read; a counter that went backwards (cleared,
wrapped) counts nothing for that interval. Nothing here raises.
"""

from __future__ import annotations

import glob
from collections.abc import Collection, Iterable
from pathlib import Path

MIB = float(2**20)
PROC_NET_DEV = Path("/proc/net/dev")
SYS_NET = Path("/sys/class/net")
IB_ROOT = Path("/sys/class/infiniband")
LUSTRE_STATS = ("/proc/fs/lustre/llite/*/stats", "/sys/kernel/debug/lustre/llite/*/stats")
_IPOIB = "32"  # ARPHRD_INFINIBAND, /sys/class/net/<if>/type


def net_dev_bytes(text: str) -> dict[str, tuple[int, int]]:
    """{interface: (received bytes, transmitted bytes)} from the text of /proc/net/dev."""
    found: dict[str, tuple[int, int]] = {}
    for line in text.splitlines()[2:]:  # two header lines
        name, _, counters = line.partition(":")
        columns = counters.split()
        if len(columns) >= 9 and columns[0].isdigit() and columns[8].isdigit():
            found[name.strip()] = (int(columns[0]), int(columns[8]))
    return found


def lustre_bytes(text: str) -> tuple[int, int] | None:
    """(read bytes, written bytes) of one llite stats file; None when it has neither line (a
    mount nothing was read from or written to yet lists neither)."""
    sums = {"read_bytes": 0, "write_bytes": 0}
    seen = False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 7 and parts[0] in sums and parts[2] == "samples" and parts[6].isdigit():
            sums[parts[0]] = int(parts[6])
            seen = True
    return (sums["read_bytes"], sums["write_bytes"]) if seen else None


class NodeIO:
    """The node's network and Lustre counters, read as deltas. `interfaces`: None reads no
    network (a one-node task shares the node's interfaces with every other job on it); () every
    device-backed interface and InfiniBand port; else the ones named."""

    def __init__(self, interfaces: Collection[str] | None, *, net_dev: Path = PROC_NET_DEV,
                 sys_net: Path = SYS_NET, ib_root: Path = IB_ROOT,
                 lustre: Iterable[str] = LUSTRE_STATS) -> None:
        self._net_dev = net_dev
        self._ports = [] if interfaces is None else _ib_ports(ib_root, interfaces)
        self._netdevs = None if interfaces is None else _netdevs(net_dev, sys_net, interfaces, bool(self._ports))
        self._lustre = [path for pattern in lustre for path in sorted(glob.glob(pattern))]
        self._last: dict[str, tuple[int, int]] = {}

    def read(self) -> dict[str, float]:
        """The sampler's `node_*` fields for the interval since the last read (the first read is
        the baseline: every delta 0). Fields whose counters could not be read are absent."""
        fields: dict[str, float] = {}
        if self._netdevs is not None:
            net = self._net_totals()
            if net is not None:
                rx, tx = self._delta("net", net)
                fields.update(node_net_rx_mb=round(rx / MIB, 3), node_net_tx_mb=round(tx / MIB, 3))
        lustre = self._lustre_totals()
        if lustre is not None:
            read, written = self._delta("lustre", lustre)
            fields.update(node_lustre_read_mb=round(read / MIB, 3), node_lustre_write_mb=round(written / MIB, 3))
        return fields

    def _delta(self, key: str, now: tuple[int, int]) -> tuple[int, int]:
        before = self._last.get(key, now)
        self._last[key] = now
        return max(0, now[0] - before[0]), max(0, now[1] - before[1])

    def _net_totals(self) -> tuple[int, int] | None:
        counted: list[tuple[int, int]] = []
        try:
            listed = net_dev_bytes(self._net_dev.read_text())
        except OSError:
            listed = {}
        counted += [listed[name] for name in self._netdevs or () if name in listed]
        for port in self._ports:
            words = (_read_int(port / "counters" / "port_rcv_data"), _read_int(port / "counters" / "port_xmit_data"))
            if words[0] is not None and words[1] is not None:
                counted.append((4 * words[0], 4 * words[1]))
        if not counted:
            return None
        return sum(rx for rx, _ in counted), sum(tx for _, tx in counted)

    def _lustre_totals(self) -> tuple[int, int] | None:
        counted: list[tuple[int, int]] = []
        for path in self._lustre:
            try:
                found = lustre_bytes(Path(path).read_text())
            except OSError:  # debugfs without root: PermissionError at every read
                continue
            if found is not None:
                counted.append(found)
        if not counted:
            return None
        return sum(r for r, _ in counted), sum(w for _, w in counted)


def _ib_ports(root: Path, wanted: Collection[str]) -> list[Path]:
    ports = sorted(root.glob("*/ports/*"))
    if not wanted:
        return ports
    return [p for p in ports if p.parent.parent.name in wanted or f"{p.parent.parent.name}:{p.name}" in wanted]


def _netdevs(net_dev: Path, sys_net: Path, wanted: Collection[str], have_ports: bool) -> list[str]:
    if wanted:
        return [name for name in wanted if ":" not in name]
    try:
        names = list(net_dev_bytes(net_dev.read_text()))
    except OSError:
        return []
    backed = [n for n in names if (sys_net / n / "device").exists()]
    return [n for n in backed if not (have_ports and _read_text(sys_net / n / "type") == _IPOIB)]


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read_text(path)
    return int(text) if text is not None and text.isdigit() else None
