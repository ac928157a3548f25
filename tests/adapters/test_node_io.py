"""The node's network and Lustre counters as the sampler reads them: recorded /proc/net/dev and
llite stats texts (tests/fixtures/node_io/README.md says where each came from), InfiniBand ports
laid out as the kernel's sysfs ABI describes them, and this machine's own /proc/net/dev."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from campaignctl.adapters.node_io import NodeIO, lustre_bytes, net_dev_bytes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "node_io"


def test_proc_net_dev_gives_each_interfaces_received_and_sent_bytes() -> None:
    found = net_dev_bytes((FIXTURES / "proc_net_dev.txt").read_text())
    assert set(found) == {"lo", "ifb0", "ifb1", "eth0"}
    assert found["eth0"] == (264450167, 368303) and found["lo"] == (21320744761, 21320744761)


def test_llite_stats_give_the_bytes_read_and_written_on_the_mount() -> None:
    assert lustre_bytes((FIXTURES / "llite_stats_llnl_2018.txt").read_text()) == (145121869, 468230469)
    # Lustre 2.12+ adds a sum of squares after the sum; a fresh mount lists neither line
    assert lustre_bytes("read_bytes 5 samples [bytes] 4096 1048576 2101248 1099578736640\n") == (2101248, 0)
    assert lustre_bytes("snapshot_time 1523008010.817348638 secs.nsecs\nopen 3 samples [reqs]\n") is None


def node(tmp_path: Path, net: dict[str, tuple[int, int]], backed: tuple[str, ...] = (),
         ipoib: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A /proc/net/dev text and a /sys/class/net tree: `backed` interfaces have a device link,
    `ipoib` ones are ARPHRD type 32."""
    dev = tmp_path / "net_dev"
    dev.write_text(net_dev_text(net))
    sys_net = tmp_path / "class_net"
    for name in net:
        (sys_net / name).mkdir(parents=True, exist_ok=True)
        (sys_net / name / "type").write_text("32\n" if name in ipoib else "1\n")
        if name in backed:
            (sys_net / name / "device").mkdir()
    return dev, sys_net


def net_dev_text(net: dict[str, tuple[int, int]]) -> str:
    rows = "".join(f"{name:>6}: {rx} 0 0 0 0 0 0 0 {tx} 0 0 0 0 0 0 0\n" for name, (rx, tx) in net.items())
    return "Inter-| Receive | Transmit\n face |bytes packets|bytes packets\n" + rows


def ib_port(root: Path, hca: str, port: int, rcv_words: int, xmit_words: int) -> None:
    counters = root / hca / "ports" / str(port) / "counters"
    counters.mkdir(parents=True, exist_ok=True)
    (counters / "port_rcv_data").write_text(f"{rcv_words}\n")
    (counters / "port_xmit_data").write_text(f"{xmit_words}\n")


def test_by_default_device_backed_interfaces_and_infiniband_ports_count_and_ipoib_not_twice(tmp_path: Path) -> None:
    counts = {"lo": (10**9, 10**9), "eth0": (2**20, 2**21), "ib0": (2**30, 2**30), "veth1": (2**25, 2**25)}
    dev, sys_net = node(tmp_path, counts, backed=("eth0", "ib0"), ipoib=("ib0",))
    ib = tmp_path / "infiniband"
    ib_port(ib, "mlx5_0", 1, 0, 0)
    reader = NodeIO((), net_dev=dev, sys_net=sys_net, ib_root=ib, lustre=())
    assert reader.read() == {"node_net_rx_mb": 0.0, "node_net_tx_mb": 0.0}  # the baseline
    counts.update(lo=(2 * 10**9, 2 * 10**9), eth0=(3 * 2**20, 2**21), ib0=(2**31, 2**31), veth1=(2**26, 2**26))
    dev.write_text(net_dev_text(counts))
    ib_port(ib, "mlx5_0", 1, 256 * 2**20, 2**20)  # 4-byte words: 1 GiB in, 4 MiB out over RDMA
    # eth0's 2 MiB in and the HCA's RDMA bytes; lo, the veth and IPoIB's ib0 (the port counts it) left out
    assert reader.read() == {"node_net_rx_mb": 1026.0, "node_net_tx_mb": 4.0}


def test_named_interfaces_only_and_a_counter_that_went_back_counts_nothing(tmp_path: Path) -> None:
    counts = {"lo": (5 * 2**20, 5 * 2**20), "eth0": (2**30, 2**30)}
    dev, sys_net = node(tmp_path, counts, backed=("eth0",))
    reader = NodeIO(["lo"], net_dev=dev, sys_net=sys_net, ib_root=tmp_path / "none", lustre=())
    reader.read()
    counts.update(lo=(7 * 2**20, 6 * 2**20), eth0=(2**31, 2**31))
    dev.write_text(net_dev_text(counts))
    assert reader.read() == {"node_net_rx_mb": 2.0, "node_net_tx_mb": 1.0}
    counts.update(lo=(2**20, 2**20))  # cleared (an interface reset)
    dev.write_text(net_dev_text(counts))
    assert reader.read() == {"node_net_rx_mb": 0.0, "node_net_tx_mb": 0.0}


def test_a_one_node_task_reads_no_network_and_an_unreadable_lustre_file_is_skipped(tmp_path: Path) -> None:
    stats = tmp_path / "lustre-ffff" / "stats"
    stats.parent.mkdir()
    stats.write_text((FIXTURES / "llite_stats_llnl_2018.txt").read_text())
    # a file the reader may not read (debugfs, 0700 without root): an OSError at every read. The
    # tests run as root, who reads anything, so a directory named like the file stands in for it
    (tmp_path / "debugfs" / "stats").mkdir(parents=True)
    reader = NodeIO(None, lustre=[str(tmp_path / "*" / "stats")])
    assert reader.read() == {"node_lustre_read_mb": 0.0, "node_lustre_write_mb": 0.0}
    stats.write_text(stats.read_text().replace("145121869", str(145121869 + 8 * 2**20)))
    found = reader.read()
    assert found["node_lustre_read_mb"] == 8.0 and found["node_lustre_write_mb"] == 0.0
    assert not any(name.startswith("node_net") for name in found)
    assert NodeIO(None, lustre=[str(tmp_path / "nowhere" / "*")]).read() == {}


def test_this_machines_loopback_counts_bytes_sent_through_it() -> None:
    """The real kernel's counters: 8 MiB through a loopback TCP connection reads as at least that
    much received and sent on `lo` (each packet is both on loopback)."""
    reader = NodeIO(["lo"])
    reader.read()
    server = socket.create_server(("127.0.0.1", 0))
    got = bytearray()

    def receive() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(1 << 16):
                got.extend(chunk)

    thread = threading.Thread(target=receive)
    thread.start()
    with socket.create_connection(server.getsockname()) as client:
        client.sendall(b"x" * (8 * 2**20))
    thread.join(10)
    server.close()
    found = reader.read()
    assert len(got) == 8 * 2**20
    assert found["node_net_rx_mb"] >= 8.0 and found["node_net_tx_mb"] >= 8.0, found
