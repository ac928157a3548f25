"""How the processes of one multi-node attempt find each other. Pure: the runner hands in the
variables Slurm set for the process (`SLURM_PROCID` …) and the rendezvous point rank 0 chose.

The variables are those PyTorch's `init_process_group(init_method="env://")`, Lightning,
DeepSpeed and JAX read: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, NODE_RANK,
LOCAL_WORLD_SIZE. With `launcher: srun` every process is a Slurm task and takes its ranks from
Slurm (seen on the lab cluster, `sbatch --nodes=2 --ntasks-per-node=2` then `srun --ntasks=4`:
`SLURM_PROCID SLURM_LOCALID SLURM_NODEID SLURMD_NODENAME` read `0 0 0 node1`, `1 1 0 node1`,
`2 0 1 node2`, `3 1 1 node2`, with `SLURM_NTASKS=4`). With `launcher: torchrun` there is one
Slurm task per node and torchrun forks the processes and sets their ranks itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from campaignctl.core.resources import TORCHRUN

# Below Linux's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default), so an
# outgoing connection never holds the port, and above 1023 so no privilege is needed.
PORT_BASE = 20000
PORT_SPAN = 10000


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one process of the attempt sits, read from Slurm's variables."""

    job_id: str
    rank: int  # SLURM_PROCID: the Slurm task's global index
    local_rank: int  # SLURM_LOCALID
    node_rank: int  # SLURM_NODEID
    nodes: int  # SLURM_JOB_NUM_NODES
    tasks: int  # SLURM_NTASKS (the step's)
    restart: int  # SLURM_RESTART_COUNT: a requeued job runs again under the same id

    @property
    def leads(self) -> bool:
        """Rank 0 chooses the rendezvous point and writes the attempt's main files."""
        return self.rank == 0

    @property
    def suffix(self) -> str:
        """Rank r > 0 writes its files as `output.rank<r>.log` …; rank 0 keeps the plain names."""
        return f".rank{self.rank}" if self.rank else ""


def placement(slurm: Mapping[str, str]) -> Placement:
    def number(name: str, default: int) -> int:
        value = slurm.get(name, "")
        return int(value) if value.isdigit() else default

    job = slurm.get("SLURM_JOB_ID", "")
    return Placement(job_id=job, rank=number("SLURM_PROCID", 0), local_rank=number("SLURM_LOCALID", 0),
                     node_rank=number("SLURM_NODEID", 0), nodes=number("SLURM_JOB_NUM_NODES", 1),
                     tasks=number("SLURM_NTASKS", 1), restart=number("SLURM_RESTART_COUNT", 0))


def derived_port(job_id: str) -> int:
    """The first port rank 0 tries: from the job id, so two attempts sharing a node differ."""
    digits = "".join(c for c in job_id if c.isdigit())
    return PORT_BASE + int(digits or "0") % PORT_SPAN


def candidate_ports(job_id: str, tries: int = 64) -> list[int]:
    first = derived_port(job_id) - PORT_BASE
    return [PORT_BASE + (first + i) % PORT_SPAN for i in range(tries)]


def rank_environment(where: Placement, master_addr: str, master_port: int, launcher: str,
                     procs_per_node: int) -> dict[str, str]:
    """What the program (or torchrun) gets on top of its environment."""
    env = {"MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port), "NODE_RANK": str(where.node_rank),
           "LOCAL_WORLD_SIZE": str(procs_per_node)}
    if launcher == TORCHRUN:
        return env  # torchrun sets RANK, LOCAL_RANK and WORLD_SIZE for each process it starts
    return {**env, "RANK": str(where.rank), "LOCAL_RANK": str(where.local_rank), "WORLD_SIZE": str(where.tasks)}


def torchrun_argv(argv: Sequence[str], where: Placement, master_addr: str, master_port: int,
                  procs_per_node: int) -> tuple[str, ...]:
    """torchrun on this node, its agents meeting at rank 0's node through a c10d rendezvous.
    `--no-python`: the spec's command is already an argv (`python train.py`), run as it is.
    `--max-restarts=0`: a failed process fails the attempt, and the policy decides what next."""
    return ("torchrun", f"--nnodes={where.nodes}", f"--nproc-per-node={procs_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={master_addr}:{master_port}",
            f"--rdzv-id={where.job_id}", "--max-restarts=0", "--no-python", *argv)
