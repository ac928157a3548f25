"""Rank 0 picks the rendezvous point and the other ranks read it from the attempt directory."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from campaignctl.adapters import rendezvous
from campaignctl.adapters.proc import ProcResult
from campaignctl.core.model.rendezvous import PORT_BASE, PORT_SPAN, Placement, placement

# `scontrol show node --oneliner node1` on the lab cluster (abridged): no DNS name, NodeAddr 127.0.0.1
SCONTROL_NODE = "NodeName=node1 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 CPUTot=2 NodeAddr=127.0.0.1 " \
                "NodeHostName=localhost Port=17001 State=IDLE Partitions=batch,high\n"


def where(rank: int, job: str = "4694") -> Placement:
    return placement({"SLURM_JOB_ID": job, "SLURM_PROCID": str(rank), "SLURM_NTASKS": "4"})


def test_rank_0_writes_the_point_and_another_rank_reads_the_same(tmp_path: Path) -> None:
    addr, port = rendezvous.meet(tmp_path, where(0), "localhost")
    assert addr == "localhost" and PORT_BASE <= port < PORT_BASE + PORT_SPAN
    assert rendezvous.meet(tmp_path, where(3), "node2") == (addr, port)
    assert [p.name for p in tmp_path.iterdir()] == ["rendezvous.4694.0.json"]


def test_a_port_in_use_on_rank_0s_node_is_skipped() -> None:
    with socket.socket() as taken:
        taken.bind(("", 0))
        busy = taken.getsockname()[1]
        assert rendezvous.free_port([busy, busy + 1 if busy < 65535 else busy - 1]) != busy


def test_a_node_name_in_no_dns_is_reached_at_slurms_node_addr(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def scontrol(argv: list[str], **_: object) -> ProcResult:
        calls.append(list(argv))
        return ProcResult(tuple(argv), 0, SCONTROL_NODE, "")

    monkeypatch.setattr(rendezvous.proc, "run", scontrol)
    assert rendezvous.node_address("node1.invalid") == "127.0.0.1"
    assert calls == [["scontrol", "show", "node", "--oneliner", "node1.invalid"]]
    assert rendezvous.node_address("localhost") == "localhost" and len(calls) == 1  # resolvable: as it is
