"""Slurm commands campaignctl uses, each through `proc.run`. Queries return text; parsing is in core."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from campaignctl.adapters import proc
from campaignctl.core.errors import SlurmUnavailableError
from campaignctl.core.sacct import SACCT_FIELDS, JobObservation, observe_jobs

DEFAULT_MAX_ARRAY_SIZE = 1001  # slurm.conf(5): MaxArraySize default


@dataclass(frozen=True, slots=True)
class QueuedJob:
    array_job_id: str
    name: str
    state: str


def max_array_size() -> int:
    """MaxArraySize from `scontrol show config` (line `MaxArraySize            = 1001`)."""
    text = proc.run(["scontrol", "show", "config"], timeout=20).stdout
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", text, re.MULTILINE)
    return int(match[1]) if match else DEFAULT_MAX_ARRAY_SIZE


def sbatch_held(script_path: str) -> str:
    """Submit held (`--hold`): nothing runs until `release`, so a crash before the job id is
    recorded leaves a held orphan we can adopt, never a running duplicate."""
    out = proc.run(["sbatch", "--parsable", "--hold", script_path], timeout=120).stdout.strip()
    job_id = out.split(";")[0]  # --parsable prints "jobid[;cluster]"
    if not job_id.isdigit():
        raise SlurmUnavailableError(f"sbatch printed {out!r}, expected a job id", "check the sbatch version")
    return job_id


def release(job_id: str) -> None:
    proc.run(["scontrol", "release", job_id], timeout=60)


def update_pending(job_id: str, fields: Sequence[str]) -> list[str]:
    """`scontrol update JobId=12_[3,5-6] Field=Value …` on pending array elements. An element that
    started meanwhile makes scontrol exit 1 with `12_3: Job is no longer pending execution` while
    the others are updated (`12_5-6: No error`): that is returned as a note, not raised."""
    result = proc.run(["scontrol", "update", f"JobId={job_id}", *fields], timeout=60, check=False)
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    started = [line for line in lines if "no longer pending" in line]
    if result.returncode != 0 and (not started or any(
            line not in started and not line.endswith("No error") for line in lines)):
        raise proc.command_error(result, transient=proc.is_transient(result))
    return started


def set_array_throttle(array_job_id: str, throttle: int) -> None:
    """How many elements of the array may run at once (the `%N` of `--array`); 0 would mean no limit."""
    proc.run(["scontrol", "update", f"JobId={array_job_id}", f"ArrayTaskThrottle={throttle}"], timeout=60)


def cancel(job_id: str) -> None:
    proc.run(["scancel", job_id], timeout=60)


def own_queued_jobs() -> list[QueuedJob]:
    """This user's queued jobs (pending arrays fold into one line per array)."""
    out = proc.run(["squeue", "--me", "--noheader", "--format=%F|%T|%j"], timeout=60).stdout
    jobs = []
    for line in out.splitlines():
        array_job_id, _, rest = line.strip().partition("|")
        state, _, name = rest.partition("|")
        if array_job_id:
            jobs.append(QueuedJob(array_job_id=array_job_id, name=name, state=state))
    return jobs


def _sacct_argv(job_ids: Sequence[str], since: datetime) -> list[str]:
    """ONE sacct call for all `job_ids` (array ids expand to their elements), steps and `-D`
    duplicates included. `-S` is explicit: without it sacct starts at midnight today."""
    return ["sacct", "--parsable2", "--noheader", "--duplicates", f"--format={','.join(SACCT_FIELDS)}",
            f"--starttime={since.strftime('%Y-%m-%dT%H:%M:%S')}", "--endtime=now",
            f"--jobs={','.join(sorted(set(job_ids), key=int))}"]


def observe(job_ids: Sequence[str], since: datetime,
            wanted: Collection[tuple[str, int | None]] | None = None) -> dict[tuple[str, int | None], JobObservation]:
    """sacct's view of `job_ids`, folded while its output streams in (only `wanted` elements)."""
    if not job_ids:
        return {}
    return proc.stream(_sacct_argv(job_ids, since), lambda lines: observe_jobs(lines, wanted), timeout=120)
