"""Slurm commands campaignctl uses, each through `proc.run`. Queries return text; parsing is in core."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from campaignctl.adapters import proc
from campaignctl.core.clock import to_slurm
from campaignctl.core.errors import SlurmUnavailableError
from campaignctl.core.fallback import NodeGpus, parse_sinfo_gpus
from campaignctl.core.sacct import SACCT_FIELDS, Observed, observe_jobs

DEFAULT_MAX_ARRAY_SIZE = 1001  # slurm.conf(5): MaxArraySize default
_SKIPPED: list[str] = []  # every output line a parser skipped in this process, "command: why: line"


def skipped_mark() -> int:
    """Where the skipped-lines record stands now: a tick or status reports what it added since."""
    return len(_SKIPPED)


def skipped_since(mark: int) -> list[str]:
    return _SKIPPED[mark:]
TEST_ONLY_REFUSAL = "allocation failure:"  # sbatch --test-only when slurm_job_will_run says no


@dataclass(frozen=True, slots=True)
class QueuedJob:
    array_job_id: str
    name: str
    state: str
    job_id: str = ""  # the element, `12_3` (or `12` for a plain job)
    reason: str = ""  # squeue's pending reason: Resources, Priority, JobArrayTaskLimit, JobHeldUser, …


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


def refusal(script_path: str) -> str | None:
    """`sbatch --test-only`: would Slurm take this script? Nothing is submitted. Returns its
    refusal, or None when Slurm would queue it. sbatch reports a refusal with slurm_perror as
    `allocation failure: Requested node configuration is not available` (too many GPUs, an
    unknown GPU type, more memory than a node has) or `… Invalid partition name specified`;
    any other failure (no slurm.conf, controller down) raises, like every call."""
    result = proc.run(["sbatch", "--test-only", script_path], timeout=60, check=False)
    if result.returncode == 0:
        return None
    refusals = [line for line in result.stderr.splitlines() if line.startswith(TEST_ONLY_REFUSAL)]
    if not refusals:
        raise proc.command_error(result, transient=proc.is_transient(result))
    return refusals[-1].removeprefix(TEST_ONLY_REFUSAL).strip()


def release(job_id: str) -> None:
    proc.run(["scontrol", "release", job_id], timeout=60)


def update_pending(job_id: str, fields: Sequence[str]) -> list[str]:
    """`scontrol update JobId=12_[3,5-6] Field=Value …` on pending array elements. An element that
    started meanwhile makes scontrol exit 1 with `12_3: Job is no longer pending execution` while
    the others are updated (`12_5-6: No error`): that is returned as a note, not raised."""
    return _per_element(["scontrol", "update", f"JobId={job_id}", *fields], "no longer pending")


def hold(job_id: str) -> list[str]:
    """`scontrol hold 12_[3,5]`: the pending elements get priority 0 (JobHeldUser, or JobHeldAdmin
    when root holds). A running element is accepted (rc 0) and keeps running; an element that
    no longer exists gives `12_9: Invalid job id specified` (rc 1) while the others are held:
    returned as a note, like an element that started meanwhile in `update_pending`."""
    return _per_element(["scontrol", "hold", job_id], "Invalid job id")


def release_elements(job_id: str) -> list[str]:
    """`scontrol release 12_[3,5]`, tolerating elements that have gone meanwhile (as `hold`)."""
    return _per_element(["scontrol", "release", job_id], "Invalid job id")


def _per_element(argv: list[str], tolerated: str) -> list[str]:
    result = proc.run(argv, timeout=60, check=False)
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    notes = [line for line in lines if tolerated in line]
    if result.returncode != 0 and (not notes or any(
            line not in notes and not line.endswith("No error") for line in lines)):
        raise proc.command_error(result, transient=proc.is_transient(result))
    return notes


def set_array_throttle(array_job_id: str, throttle: int) -> None:
    """How many elements of the array may run at once (the `%N` of `--array`); 0 would mean no limit."""
    proc.run(["scontrol", "update", f"JobId={array_job_id}", f"ArrayTaskThrottle={throttle}"], timeout=60)


def cancel_if(job_id: str, state: str) -> bool:
    """`scancel --state=PENDING 12_3`: cancels the element only if it is still in `state`, so an
    element that started meanwhile keeps running (rc 0 either way on a live array). On a job that
    has left the controller scancel says `Invalid job id specified` and exits 1: nothing to
    cancel, returned as False."""
    result = proc.run(["scancel", f"--state={state}", job_id], timeout=60, check=False)
    if result.returncode != 0:
        if "Invalid job id" in result.stderr:
            return False
        raise proc.command_error(result, transient=proc.is_transient(result))
    return True


def own_queued_jobs() -> list[QueuedJob]:
    """This user's queued jobs, one line per array element (`-r`): a pending array otherwise
    folds into one line whose reasons are comma-joined (`JobArrayTaskLimit,JobHeldAdmin`).
    squeue lists every job of the user, campaignctl's or not: a line it cannot read (one job
    named in Latin-1, `sbatch -J $'\\xe9t\\xe9'`) is skipped and counted, never fatal."""
    out = proc.run(["squeue", "--me", "-r", "--noheader", "--format=%F|%T|%j|%i|%r"], timeout=60).stdout
    return parse_queued(out, _SKIPPED)


def parse_queued(text: str, skipped: list[str]) -> list[QueuedJob]:
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.strip().split("|", 4)
        if len(fields) < 3 or not fields[0].isdigit() or "\ufffd" in line:
            why = "non-UTF-8 bytes" if "\ufffd" in line else "not `array id|state|name|job id|reason`"
            skipped.append(f"squeue: {why}: {line.strip()[:120]}")
            continue
        array_job_id, state, name, job_id, reason = [*fields, "", ""][:5]
        jobs.append(QueuedJob(array_job_id, name, state, job_id, reason))
    return jobs


def gpu_nodes() -> list[NodeGpus]:
    """GPUs per node and type, configured and in use, from one sinfo call (lines like
    `node1|gpu:a100:2|gpu:a100:1(IDX:0)|mixed`; `-N` repeats a node per partition)."""
    out = proc.run(["sinfo", "-N", "--noheader", "-O", "NodeList:|,Gres:|,GresUsed:|,StateLong:"],
                   timeout=60).stdout
    return parse_sinfo_gpus(out)


def _sacct_argv(job_ids: Sequence[str], since: datetime) -> list[str]:
    """ONE sacct call for all `job_ids` (array ids expand to their elements), steps and `-D`
    duplicates included. `-S` is explicit: without it sacct starts at midnight today.
    `--federation`: in a federation a job that started on a sibling cluster is only a REVOKED copy
    here; the run's own record comes with the federation's view (a no-op elsewhere, checked on 22.05)."""
    return ["sacct", "--parsable2", "--noheader", "--duplicates", "--federation",
            f"--format={','.join(SACCT_FIELDS)}",
            f"--starttime={to_slurm(since)}", "--endtime=now",  # read in UTC: proc runs sacct with TZ=UTC
            f"--jobs={','.join(sorted(set(job_ids), key=int))}"]


def observe(job_ids: Sequence[str], since: datetime,
            wanted: Collection[tuple[str, int | None]] | None = None) -> Observed:
    """sacct's view of `job_ids`, folded while its output streams in (only `wanted` elements);
    the lines it skipped are added to the record `skipped_since` reads."""
    if not job_ids:
        return Observed()
    observed = proc.stream(_sacct_argv(job_ids, since), lambda lines: observe_jobs(lines, wanted), timeout=120)
    _SKIPPED.extend(f"sacct: {note}" for note in observed.skipped)
    return observed
