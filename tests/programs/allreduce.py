"""A plain torch.distributed program (Gloo, CPU), the kind a user would write: it reads only the
standard variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT …), joins the group,
checks its place in it and sums one tensor across every process.

    python allreduce.py WORLD NODES [HOLD_S [HANG_NODE_RANK [TIMEOUT_S]]]

Exits 3 when a rank or the world size is not what the launcher should have given, 4 when the
all-reduce sum is wrong. HOLD_S: seconds every rank waits before the all-reduce on a first attempt
(so a test can fail a node while the attempt runs; a retry does not wait). HANG_NODE_RANK: on a
first attempt (CAMPAIGNCTL_ATTEMPT=1, as a program that resumes from a checkpoint reads it) the
ranks of that node stall for 3 ×
TIMEOUT_S before the all-reduce, so the other ranks' collective times out (Gloo's timeout is the
process group's, TIMEOUT_S, 60 by default). Rank 0 reports the sum as a metric. With
ALLREDUCE_LOOP_S set, every rank then all-reduces a 32 MiB tensor again and again for that many
seconds, as data-parallel training does its gradients: the time goes to the network."""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist


def main() -> int:
    world, nodes = int(sys.argv[1]), int(sys.argv[2])
    given = [float(a) for a in sys.argv[3:6]]
    hold, hang, timeout = [*given, *(0.0, -1.0, 60.0)[len(given):]]
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local, local_size = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    node = os.environ.get("SLURMD_NODENAME", socket.gethostname())
    print(f"rank {rank} of {size} local {local} of {local_size} node_rank {os.environ.get('NODE_RANK')} "
          f"on {node} master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    if size != world or not 0 <= rank < size or not 0 <= local < local_size or local_size * nodes != world:
        print(f"wrong placement: expected world {world} over {nodes} nodes", flush=True)
        return 3
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=timeout))
    first_attempt = os.environ.get("CAMPAIGNCTL_ATTEMPT") == "1"
    time.sleep(hold if first_attempt else 0)
    if int(os.environ.get("NODE_RANK", "0")) == hang and first_attempt:
        print(f"rank {rank} stalls for {3 * timeout:g} s", flush=True)
        time.sleep(3 * timeout)
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    gradients, until = torch.ones(8 * 2**20), time.time() + float(os.environ.get("ALLREDUCE_LOOP_S", "0"))
    while _all_still(time.time() < until):  # every rank makes the same number of calls, or they hang
        dist.all_reduce(gradients)
    names: list[object] = [None] * size
    dist.all_gather_object(names, node)
    dist.destroy_process_group()
    expected = size * (size + 1) / 2
    print(f"rank {rank} all_reduce sum {value.item():g} (expected {expected:g}) nodes {sorted(set(map(str, names)))}",
          flush=True)
    if value.item() != expected or len(set(names)) != nodes:
        return 4
    if rank == 0 and os.environ.get("CAMPAIGNCTL_METRICS"):
        with open(os.environ["CAMPAIGNCTL_METRICS"], "a") as out:
            out.write(json.dumps({"step": 1, "allreduce_sum": value.item(), "nodes": len(set(names))}) + "\n")
    return 0


def _all_still(going: bool) -> bool:
    """Whether every rank is still going: each rank's clock reaches the deadline after its own
    number of calls, and a rank that left the loop would call the next collective alone."""
    flag = torch.tensor([1.0 if going else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


if __name__ == "__main__":
    sys.exit(main())
