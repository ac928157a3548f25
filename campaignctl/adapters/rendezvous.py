"""Job side: rank 0 of a multi-node attempt picks the rendezvous point (its node's address and a
free port) and writes it to the attempt directory, which every node already reaches (the run
directory is on the shared filesystem); the other ranks read it there. A port derived from the
job id alone could be taken on rank 0's node, and only that node can tell."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from campaignctl.adapters import proc
from campaignctl.adapters.paths import write_atomic
from campaignctl.core.model.rendezvous import Placement, candidate_ports

WAIT_S = 300.0  # the other ranks may start before rank 0 (srun starts tasks node by node)


def rendezvous_file(attempt_dir: Path, where: Placement) -> Path:
    # a requeued job runs again under its id, maybe on other nodes: one file per run
    return attempt_dir / f"rendezvous.{where.job_id}.{where.restart}.json"


def meet(attempt_dir: Path, where: Placement, node_name: str) -> tuple[str, int]:
    """(MASTER_ADDR, MASTER_PORT) for this attempt's run."""
    path = rendezvous_file(attempt_dir, where)
    if where.leads:
        addr, port = node_address(node_name), free_port(candidate_ports(where.job_id))
        write_atomic(path, json.dumps({"master_addr": addr, "master_port": port, "node": node_name}))
        return addr, port
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank 0 wrote no {path.name} within {WAIT_S:.0f} s")
        time.sleep(0.5)
    point = json.loads(path.read_text())
    return str(point["master_addr"]), int(point["master_port"])


def node_address(name: str) -> str:
    """The node's name where it resolves (a real site); else the NodeAddr slurmctld has for it.
    On the lab cluster every node is `NodeHostname=localhost NodeAddr=127.0.0.1`, and `node1`
    is in no DNS (`getent hosts node1` prints nothing)."""
    try:
        socket.getaddrinfo(name, None)
        return name
    except OSError:
        pass
    out = proc.run(["scontrol", "show", "node", "--oneliner", name], timeout=60).stdout
    for field in out.split():
        key, _, value = field.partition("=")
        if key == "NodeAddr" and value:
            return value
    return name


def free_port(candidates: list[int]) -> int:
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("", port))
                return port
            except OSError:
                continue
    raise OSError(f"no free port among {candidates[0]}-{candidates[-1]} on this node")
