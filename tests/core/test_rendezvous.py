"""The variables each process of a multi-node attempt gets, from what Slurm set for it (the
values below are those the lab cluster gave `srun --ntasks=4` in a `--nodes=2
--ntasks-per-node=2` job)."""

from __future__ import annotations

import pytest

from campaignctl.core.model.rendezvous import (
    PORT_BASE,
    PORT_SPAN,
    candidate_ports,
    derived_port,
    placement,
    rank_environment,
    torchrun_argv,
)


def slurm(procid: int, localid: int, nodeid: int, ntasks: int = 4) -> dict[str, str]:
    return {"SLURM_JOB_ID": "4694", "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(localid),
            "SLURM_NODEID": str(nodeid), "SLURM_NTASKS": str(ntasks), "SLURM_JOB_NUM_NODES": "2"}


@pytest.mark.parametrize(("procid", "localid", "nodeid"), [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)])
def test_srun_ranks_come_from_slurm(procid: int, localid: int, nodeid: int) -> None:
    env = rank_environment(placement(slurm(procid, localid, nodeid)), "node1", 24694, "srun", 2)
    assert env == {"MASTER_ADDR": "node1", "MASTER_PORT": "24694", "RANK": str(procid), "LOCAL_RANK": str(localid),
                   "WORLD_SIZE": "4", "NODE_RANK": str(nodeid), "LOCAL_WORLD_SIZE": "2"}


def test_torchrun_sets_the_process_ranks_itself_and_meets_at_rank_0s_node() -> None:
    where = placement(slurm(1, 0, 1, ntasks=2))
    env = rank_environment(where, "10.0.0.1", 24694, "torchrun", 2)
    assert "RANK" not in env and "WORLD_SIZE" not in env and env["NODE_RANK"] == "1"
    argv = torchrun_argv(("python3", "train.py", "--lr", "0.1"), where, "10.0.0.1", 24694, 2)
    assert argv == ("torchrun", "--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                    "--rdzv-endpoint=10.0.0.1:24694", "--rdzv-id=4694", "--max-restarts=0", "--no-python",
                    "python3", "train.py", "--lr", "0.1")


def test_only_rank_0_leads_and_other_ranks_write_their_own_files() -> None:
    assert placement(slurm(0, 0, 0)).leads and placement(slurm(0, 0, 0)).suffix == ""
    assert not placement(slurm(3, 1, 1)).leads and placement(slurm(3, 1, 1)).suffix == ".rank3"


def test_ports_are_unprivileged_below_the_ephemeral_range_and_differ_by_job() -> None:
    assert derived_port("4694") == 24694 and derived_port("123_4") == PORT_BASE + 1234
    ports = candidate_ports("29999")
    assert ports[0] == 29999 and ports[1] == PORT_BASE  # wraps within the range
    assert all(PORT_BASE <= p < PORT_BASE + PORT_SPAN < 32768 for p in ports)
