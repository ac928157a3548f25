"""A job on one of several clusters: `lab2:1234_5`. Pure.

Job ids are per cluster (each slurmctld counts its own), so a job on another cluster than the one
SLURM_CONF names is recorded, compared, sorted and observed qualified by its cluster: `lab2:12` and
`12` are two jobs. A job on the cluster SLURM_CONF names keeps its plain id (`1234_5`), whether its
campaign names `clusters:` or not, as it always did: a campaign of one cluster and one of several
read the same squeue line alike in one tick (adapters/slurm.local).
Slurm's cluster names are letters, digits, `_` and `-` (`sacctmgr add cluster`), never `:`, so the
first `:` ends the cluster. Slurm's clients take the plain id with `-M <cluster>`
(adapters/slurm.py)."""

from __future__ import annotations

SEP = ":"


def qualified(cluster: str, job_id: str) -> str:
    """`job_id` on `cluster` ('' : the default cluster, unqualified)."""
    return f"{cluster}{SEP}{job_id}" if cluster else job_id


def split(ref: str) -> tuple[str, str]:
    """`lab2:12_3` → ('lab2', '12_3'); `12_3` → ('', '12_3')."""
    cluster, sep, job_id = ref.partition(SEP)
    return (cluster, job_id) if sep else ("", ref)


def plain(ref: str) -> str:
    """The id as Slurm prints it on its own cluster: `lab2:12_3` → `12_3`."""
    return ref.rpartition(SEP)[2]


def cluster_of(ref: str) -> str:
    return split(ref)[0]


def order(ref: str) -> tuple[str, int]:
    """Sort key of an array job id, qualified or not: by cluster, then numerically."""
    cluster, job_id = split(ref)
    digits = job_id.partition("_")[0]
    return cluster, int(digits) if digits.isdigit() else -1
