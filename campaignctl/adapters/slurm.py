"""Slurm commands campaignctl uses, each through `proc.run`. Queries return text; parsing is in core."""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import re
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from campaignctl.adapters import proc
from campaignctl.core.base.clock import to_slurm
from campaignctl.core.base.errors import SiteLimitError, SlurmUnavailableError
from campaignctl.core.policy.suspects import EVENT_FIELDS
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.clusters import observe_clusters, split_by_cluster, test_only_start
from campaignctl.core.slurm.plan import DEFAULT_MAX_ARRAY_SIZE
from campaignctl.core.slurm.sacct import SACCT_FIELDS, Observed, observe_jobs
from campaignctl.core.slurm.sacct_records import Reading
from campaignctl.core.slurm.site_limits import may_be_submit_limit, names_submit_limit
from campaignctl.core.slurm.site_limits import submit_limit as read_submit_limit
from campaignctl.core.slurm.slurm_version import SlurmVersion, parse_cluster_name, parse_version
from campaignctl.core.tick.fallback import NodeGpus, parse_sinfo_gpus
from campaignctl.core.tick.siblings import NodeShape, parse_node_shapes

_SKIPPED: list[str] = []  # every output line a parser skipped in this process, "command: why: line"
SHOWN_SKIPS = 5  # skipped lines a tick or status quotes; its count covers them all


def skipped_mark() -> int:
    """Where the skipped-lines record stands now: a tick or status reports what it added since."""
    return len(_SKIPPED)


def skipped_since(mark: int) -> list[str]:
    return _SKIPPED[mark:]


TEST_ONLY_REFUSAL = "allocation failure:"  # sbatch --test-only when slurm_job_will_run says no


@dataclass(frozen=True, slots=True)
class QueuedJob:
    array_job_id: str  # qualified by its cluster when squeue was asked about several (core/slurm/job_ref.py)
    name: str
    state: str
    job_id: str = ""  # the element, `12_3` (or `12` for a plain job)
    reason: str = ""  # squeue's pending reason: Resources, Priority, JobArrayTaskLimit, JobHeldUser, …
    start: str = ""  # squeue's StartTime: for a pending job the backfill scheduler's expected start, or N/A


def local(cluster: str) -> str:
    """'' for the cluster SLURM_CONF names (its job ids stay plain: core/slurm/job_ref.py), else `cluster`."""
    return "" if not cluster or cluster == cluster_name() else cluster


def _on(cluster: str) -> list[str]:
    """`-M <cluster>`: the client asks slurmdbd where that cluster's slurmctld listens. None for
    the cluster SLURM_CONF names: its jobs are addressed as they always were."""
    cluster = local(cluster)
    return ["-M", cluster] if cluster else []


def _split(ref: str) -> tuple[list[str], str]:
    """A job id as the clients take it: `-M lab2` and `12_3` for `lab2:12_3`."""
    cluster, job_id = job_ref.split(ref)
    return _on(cluster), job_id


@functools.cache
def version() -> SlurmVersion | None:
    """The Slurm this process talks to, from `sacct --version` once per process (a tick, a
    command): the client prints the version it was built as without asking slurmctld or slurmdbd,
    so it costs no RPC. None when it cannot be read (then the readings of 22.05–25.05 apply)."""
    result = proc.run(["sacct", "--version"], timeout=20, attempts=1, check=False)
    return parse_version(result.stdout) if result.returncode == 0 else None


@functools.cache
def cluster_name() -> str:
    """slurm.conf's ClusterName (what `sacctmgr show clusters` lists: the node ledger's key, the
    cluster plain job ids are on), once per process: read from the file SLURM_CONF names (no RPC, and
    it answers while that cluster's slurmctld is down), else from `scontrol show config` (a
    configless site has no local slurm.conf); the environment's CAMPAIGNCTL_CLUSTER wins, and
    'default' stands in when neither says."""
    given = os.environ.get("CAMPAIGNCTL_CLUSTER", "").strip()
    if given:
        return given
    with contextlib.suppress(OSError):
        named = parse_cluster_name(Path(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf").read_text(
            encoding="utf-8", errors="replace"))
        if named != "default":
            return named
    result = proc.run(["scontrol", "show", "config"], timeout=30, attempts=1, check=False)
    return parse_cluster_name(result.stdout) if result.returncode == 0 else "default"


def partition_nodes(partition: str | None) -> tuple[str, ...]:
    """The nodes of the partition (the default partition's without one): sinfo, one line each."""
    out = proc.run(["sinfo", "-h", "-N", "-o", "%N", *(["-p", partition] if partition else [])], timeout=60).stdout
    return tuple(sorted({line.strip() for line in out.splitlines() if line.strip()}))


def forget_site() -> None:
    """Forget what this process read of the site (version, limits, resources Slurm would take):
    a test's new Slurm."""
    version.cache_clear()
    cluster_name.cache_clear()
    reading.cache_clear()
    submit_limit.cache_clear()
    max_array_size.cache_clear()
    _TAKEN.clear()


@functools.cache
def reading() -> Reading:
    """How this site's sacct output is read (core/slurm/sacct_records.Reading), once per process: by its
    Slurm's version, and with root, the `slurm` account (SlurmUser by convention) and this user as
    the jobs' own cancellers."""
    own = {"0", str(os.getuid())}
    with contextlib.suppress(KeyError):
        own.add(str(pwd.getpwnam("slurm").pw_uid))
    found = version()
    return Reading(exit_codes_verbatim=found is not None and found.exit_codes_verbatim, own_cancellers=frozenset(own))


@functools.cache
def submit_limit() -> int | None:
    """This user's limit on queued jobs (every array element counts), read once per process from
    the accounting database: the association's MaxSubmit and its QOS's MaxSubmitPU, the smaller.
    None when none is set or the user may not read them (sacctmgr answers with an error or
    nothing): then the limit is learnt from sbatch's refusal (core/slurm/site_limits.SubmitRoom).
    Only this cluster's associations: `show assoc` lists every cluster of the accounting database,
    and a limit set on another is not enforced here."""
    user = pwd.getpwuid(os.getuid()).pw_name
    where = [f"user={user}"] + ([f"cluster={here}"] if (here := cluster_name()) != "default" else [])
    assoc = proc.run(["sacctmgr", "-n", "-P", "show", "assoc", "where", *where, "format=MaxSubmit,QOS"],
                     timeout=30, attempts=1, check=False)
    if assoc.returncode != 0:
        return None
    rows = [line.split("|") for line in assoc.stdout.splitlines() if "|" in line]
    qos_names = sorted({q for row in rows for q in row[1].split(",") if q})
    qos = proc.run(["sacctmgr", "-n", "-P", "show", "qos", "where", f"name={','.join(qos_names)}",
                    "format=MaxSubmitPU"], timeout=30, attempts=1, check=False) if qos_names else None
    return read_submit_limit("\n".join(row[0] for row in rows),
                             qos.stdout if qos is not None and qos.returncode == 0 else "")


def array_cap(clusters: Sequence[str] = ()) -> int:
    """The most elements one array may have: MaxArraySize (the smallest of `clusters`' when a
    campaign names several), and never more than the submit limit (an array larger than what the
    user may have queued would wait for ever)."""
    limit = submit_limit()
    size = min(max_array_size(c) for c in clusters) if clusters else max_array_size()
    return min(size, limit) if limit else size


def _limit_error(result: proc.ProcResult, lines: Sequence[str]) -> SiteLimitError:
    """sbatch refused for a limit: the message keeps the reason line (`AssocMaxSubmitJobLimit`)
    with the refusal, so that the caller can tell a named submit limit from the generic text."""
    named = [line.split("error:", 1)[-1].strip() for line in result.stderr.splitlines() if names_submit_limit(line)]
    detail = "; ".join(dict.fromkeys([*named, *(line.split("failed:", 1)[-1].removeprefix(TEST_ONLY_REFUSAL).strip()
                                                for line in lines)]))
    return SiteLimitError(f"Slurm refuses the job for now: {detail}",
                          "it goes out once the user's queued jobs leave room (`sacctmgr show assoc user=$USER`)")


@functools.cache
def max_array_size(cluster: str = "") -> int:
    """MaxArraySize from `scontrol show config` (line `MaxArraySize            = 1001`), once per
    process and cluster: the call costs two RPCs of a rate-limited user's bucket (24.11, counted
    with sdiag). A cluster named (`clusters:`) that does not answer is taken at Slurm's default:
    placement sends nothing there while it is down."""
    result = proc.run(["scontrol", *_on(cluster), "show", "config"], timeout=20, attempts=1 if cluster else 4,
                      check=not cluster)
    text = result.stdout if result.returncode == 0 else ""  # a named cluster's slurmctld down: Slurm's default
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", text, re.MULTILINE)
    return int(match[1]) if match else DEFAULT_MAX_ARRAY_SIZE


SBATCH_TRIES = 4  # sbatch runs within one call, each rerun only after squeue found no job of its name
SBATCH_BACKOFF_S = 1.0


def sbatch_held(script_path: str, job_name: str, cluster: str = "") -> str:
    """Submit held (`--hold`): nothing runs until `release`, so a crash before the job id is
    recorded leaves a held orphan we can adopt, never a running duplicate.

    sbatch is never run again for `job_name` (it carries the submission's token) before squeue
    says no job of ours has that name: `sbatch: error: Batch job submission failed: Socket timed
    out on send/recv operation` can come after slurmctld created the job (the reply was lost),
    and a blind retry left several held jobs carrying one token. The job found is adopted.
    `cluster`: submitted there with `-M` (`--parsable` then prints `12;lab2`); the id returned is
    qualified by it (core/slurm/job_ref.py)."""
    result = proc.ProcResult(("sbatch",), -1, "", "")
    for attempt in range(SBATCH_TRIES):
        if attempt:
            time.sleep(SBATCH_BACKOFF_S * 2 ** (attempt - 1))
            found = adopt_named(job_name, cluster=cluster)
            if found is not None:
                return found
        result = proc.run(["sbatch", *_on(cluster), "--parsable", "--hold", script_path], timeout=120, attempts=1,
                          check=False)
        if result.returncode == 0:
            return _job_id_of(result, job_name, cluster)
        if result.returncode == 124 or not proc.is_transient(result):
            break  # our own timeout bounds the call; the next tick looks the name up first
    if result.returncode != 0 and may_be_submit_limit(result.stderr):
        raise _limit_error(result, [line for line in result.stderr.splitlines() if "submission failed" in line])
    raise proc.command_error(result, transient=proc.is_transient(result))


def _job_id_of(result: proc.ProcResult, job_name: str, cluster: str = "") -> str:
    """`--parsable` prints "jobid[;cluster]". sbatch exited 0, so the job most likely exists
    even when its output cannot be read: look it up by name before calling that a failure."""
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    job_id = lines[-1].split(";")[0] if lines else ""
    if job_id.isdigit():
        return job_ref.qualified(local(cluster), job_id)
    found = adopt_named(job_name, cluster=cluster)
    if found is not None:
        return found
    raise SlurmUnavailableError(f"sbatch printed {result.stdout.strip()[:200]!r}, expected a job id",
                                "check the sbatch version and `squeue --me`")


def named_jobs(job_name: str, cluster: str = "") -> list[str]:
    """Array job ids of this user's queued jobs named exactly `job_name`, oldest first (on
    `cluster`, qualified by it)."""
    out = proc.run(["squeue", *_on(cluster), "--me", "-r", "--noheader", f"--name={job_name}",
                    f"--format={QUEUE_FORMAT}"], timeout=60).stdout
    ids = {job_ref.qualified(local(cluster), q.array_job_id) for q in parse_queued(out, _SKIPPED) if q.name == job_name}
    return sorted(ids, key=job_ref.order)


def adopt_named(job_name: str, keep: str | None = None, cluster: str = "") -> str | None:
    """The queued job of ours named `job_name` (`keep` if it is one of them, else the oldest);
    any other job of that name, ours and queued under the same token, is a duplicate an older
    version's retry left: it is cancelled. None when no such job is queued."""
    return adopt_from(named_jobs(job_name, cluster), keep)


def adopt_from(found: Sequence[str], keep: str | None = None) -> str | None:
    """`adopt_named` over ids already listed (`own_queued_jobs`): the one kept, the others cancelled."""
    if not found:
        return None
    chosen = keep if keep in found else found[0]
    for stray in found:
        if stray != chosen:
            cancel(stray)
    return chosen


def cancel(job_id: str) -> None:
    """`scancel 12`: the whole (held) job. A job already gone is nothing to cancel."""
    on, plain = _split(job_id)
    result = proc.run(["scancel", *on, plain], timeout=60, check=False)
    if result.returncode != 0 and "Invalid job id" not in result.stderr:
        raise proc.command_error(result, transient=proc.is_transient(result))


_TAKEN: set[tuple[str, str]] = set()  # (cluster, resource request) `sbatch --test-only` accepted in this process
# what differs per array and never decides whether Slurm takes a job (the output path is where
# the array's folder is: submit's checks stage in a temporary one)
_PER_ARRAY = ("#SBATCH --array=", "#SBATCH --comment=", "#SBATCH --job-name=", "#SBATCH --output=",
              "#SBATCH --error=")


def _request(script: str) -> str:
    """What `--test-only` judges of a script: its `#SBATCH` lines but those that differ per array."""
    return "\n".join(line for line in script.splitlines()
                     if line.startswith("#SBATCH") and not line.startswith(_PER_ARRAY))


def refusal(script_path: str, cluster: str = "") -> str | None:
    """`sbatch --test-only`: would Slurm take this script? Nothing is submitted. Returns its
    refusal, or None when Slurm would queue it. sbatch reports a refusal with slurm_perror as
    `allocation failure: Requested node configuration is not available` (too many GPUs, an
    unknown GPU type, more memory than a node has) or `… Invalid partition name specified`;
    any other failure (no slurm.conf, controller down) raises, like every call. A request Slurm
    took once is not asked again in this process: a tick resubmitting 1,000 tasks as ten arrays of
    the same resources asks once, not ten times (two RPCs each against a rate-limited bucket of 30)."""
    request = (cluster, _request(Path(script_path).read_text(encoding="utf-8")))
    if request in _TAKEN:
        return None
    result = proc.run(["sbatch", *_on(cluster), "--test-only", script_path], timeout=60, check=False)
    if result.returncode == 0:
        _TAKEN.add(request)
        return None
    refusals = [line for line in result.stderr.splitlines() if line.startswith(TEST_ONLY_REFUSAL)]
    if not refusals:
        raise proc.command_error(result, transient=proc.is_transient(result))
    if may_be_submit_limit(result.stderr):  # `allocation failure: Job violates accounting/QOS policy …`
        raise _limit_error(result, refusals[-1:])
    return refusals[-1].removeprefix(TEST_ONLY_REFUSAL).strip()


def predicted_start(script_path: str, cluster: str) -> tuple[str | None, str]:
    """When `cluster` would start this script now: `sbatch -M <cluster> --test-only` asks its
    slurmctld (`sbatch: Job 4 to start at 2026-11-30T01:34:46 using 1 processors on nodes nodeb1
    in partition batch`, 22.05 and 24.11). Returns (the time, '') or (None, why not): Slurm's
    refusal (every node of the partition drained: `Requested node configuration is not
    available`), or that the cluster does not answer (its slurmctld is down: slurmdbd has no
    address for it, `'lab' can't be reached now`)."""
    result = proc.run(["sbatch", "-M", cluster, "--test-only", script_path], timeout=60, attempts=1, check=False)
    return test_only_start(result.returncode, result.stderr)


def release(job_id: str) -> None:
    """`scontrol release 12`. Releasing a job already released (pending or running) exits 0; a
    job that has ended meanwhile (run, or cancelled by someone while held) gives `Job has
    already finished for job 12` and exit 1 (22.05): nothing left to release, and sacct tells
    what became of it. Past MinJobAge (short at some sites) slurmctld has forgotten the job:
    `Invalid job id specified`, the same answer."""
    on, plain = _split(job_id)
    result = proc.run(["scontrol", *on, "release", plain], timeout=60, check=False)
    if result.returncode != 0 and not any(gone in result.stderr for gone in ("has already finished", "Invalid job id")):
        raise proc.command_error(result, transient=proc.is_transient(result))


def update_pending(job_id: str, fields: Sequence[str]) -> list[str]:
    """`scontrol update JobId=12_[3,5-6] Field=Value …` on pending array elements. An element that
    started meanwhile makes scontrol exit 1 with `12_3: Job is no longer pending execution` while
    the others are updated (`12_5-6: No error`): that is returned as a note, not raised."""
    on, plain = _split(job_id)
    return _per_element(["scontrol", *on, "update", f"JobId={plain}", *fields], "no longer pending")


def hold(job_id: str) -> list[str]:
    """`scontrol hold 12_[3,5]`: the pending elements get priority 0 (JobHeldUser, or JobHeldAdmin
    when root holds). A running element is accepted (rc 0) and keeps running; an element that
    no longer exists gives `12_9: Invalid job id specified` (rc 1) while the others are held:
    returned as a note, like an element that started meanwhile in `update_pending`."""
    on, plain = _split(job_id)
    return _per_element(["scontrol", *on, "hold", plain], "Invalid job id")


def release_elements(job_id: str) -> list[str]:
    """`scontrol release 12_[3,5]`, tolerating elements that have gone meanwhile (as `hold`)."""
    on, plain = _split(job_id)
    return _per_element(["scontrol", *on, "release", plain], "Invalid job id")


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
    on, plain = _split(array_job_id)
    proc.run(["scontrol", *on, "update", f"JobId={plain}", f"ArrayTaskThrottle={throttle}"], timeout=60)


def cancel_if(job_id: str, state: str) -> bool:
    """`scancel --state=PENDING 12_3`: cancels the element only if it is still in `state`, so an
    element that started meanwhile keeps running (rc 0 either way on a live array); `state` ''
    cancels it in any state (`campaignctl cancel`). On a job that has left the controller scancel
    says `Invalid job id specified` and exits 1: nothing to cancel, returned as False."""
    on, plain = _split(job_id)
    result = proc.run(["scancel", *on, *([f"--state={state}"] if state else []), plain], timeout=60, check=False)
    if result.returncode != 0:
        if "Invalid job id" in result.stderr:
            return False
        raise proc.command_error(result, transient=proc.is_transient(result))
    return True


def cancel_step_named(job_id: str, name: str) -> bool:
    """`scancel 12_3.2`: the running step of element `job_id` named `name` (a packed task's
    step is named by its attempt token, core/pack_plan.py), its neighbours' steps left running.
    `squeue -s` lists the element's steps with their names; False when none has that name (not
    started yet, or ended)."""
    on, plain = _split(job_id)
    listed = proc.run(["squeue", *on, "-s", "--noheader", "-j", plain, "--format=%i|%j"], timeout=60, check=False)
    steps = [line.split("|", 1)[0] for line in listed.stdout.splitlines() if line.split("|", 1)[-1] == name]
    if not steps:
        return False
    return cancel_if(job_ref.qualified(job_ref.cluster_of(job_id), steps[-1]), "")


QUEUE_FORMAT = "%F|%T|%j|%i|%r|%S"  # the reason never holds `|`; StartTime last


def own_queued_jobs() -> list[QueuedJob]:
    """This user's queued jobs, one line per array element (`-r`): a pending array otherwise
    folds into one line whose reasons are comma-joined (`JobArrayTaskLimit,JobHeldAdmin`).
    squeue lists every job of the user, campaignctl's or not: a line it cannot read (one job
    named in Latin-1, `sbatch -J $'\\xe9t\\xe9'`) is skipped and counted, never fatal."""
    out = proc.run(["squeue", "--me", "-r", "--noheader", f"--format={QUEUE_FORMAT}"], timeout=60).stdout
    return parse_queued(out, _SKIPPED)


def queued_on(clusters: Sequence[str]) -> tuple[list[QueuedJob], frozenset[str]]:
    """This user's queued jobs on every cluster of `clusters` (one `squeue -M a,b`), their ids
    qualified by cluster (but the default cluster's, `local`), and the clusters that answered.
    With -M, squeue heads each cluster's lines with `CLUSTER: lab2` (kept here: no --noheader) and
    says nothing at all of a cluster whose slurmctld is down — exit 0, no line, no error, on 22.05
    and 24.11 (its slurmctld deregistered from slurmdbd, `sacctmgr show clusters` lists it without a ControlHost) — so a
    cluster without its heading did not answer: none of its jobs can be told queued or gone."""
    result = proc.run(["squeue", "-M", ",".join(clusters), "--me", "-r", f"--format={QUEUE_FORMAT}"], timeout=60,
                      check=False)
    if result.returncode != 0 and not result.stdout.strip():
        raise proc.command_error(result, transient=proc.is_transient(result))
    jobs: list[QueuedJob] = []
    answered = set()
    for cluster, lines in split_by_cluster(result.stdout).items():
        answered.add(cluster)
        here = local(cluster)
        jobs += [replace(q, array_job_id=job_ref.qualified(here, q.array_job_id),
                         job_id=job_ref.qualified(here, q.job_id)) for q in parse_queued("\n".join(lines), _SKIPPED)]
    return jobs, frozenset(answered)


def parse_queued(text: str, skipped: list[str]) -> list[QueuedJob]:
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.strip().split("|", 5)
        if len(fields) < 3 or not fields[0].isdigit() or "\ufffd" in line:
            why = "non-UTF-8 bytes" if "\ufffd" in line else "not `array id|state|name|job id|reason|start`"
            skipped.append(f"squeue: {why}: {line.strip()[:120]}")
            continue
        array_job_id, state, name, job_id, reason, start = [*fields, "", "", ""][:6]
        jobs.append(QueuedJob(array_job_id, name, state, job_id, reason, start))
    return jobs


def gpu_nodes() -> list[NodeGpus]:
    """GPUs per node and type, configured and in use, from one sinfo call (lines like
    `node1|gpu:a100:2|gpu:a100:1(IDX:0)|mixed`; `-N` repeats a node per partition)."""
    out = proc.run(["sinfo", "-N", "--noheader", "-O", "NodeList:|,Gres:|,GresUsed:|,StateLong:"],
                   timeout=60).stdout
    return parse_sinfo_gpus(out)


def node_shapes(partition: str | None) -> tuple[NodeShape, ...]:
    """The CPUs, memory and GPUs of the partition's nodes (the default partition's without one)."""
    argv = ["sinfo", "-N", "--noheader", "-O", "NodeList:|,CPUs:|,Memory:|,Gres:|,StateLong:"]
    return parse_node_shapes(proc.run([*argv, *(["-p", partition] if partition else [])], timeout=60).stdout)


def node_events(nodes: Sequence[str], since: datetime, until: datetime) -> str:
    """The accounting database's state changes of `nodes` between the two times, one per line:
    `node2|2026-11-24T08:30:19|2026-11-24T08:30:19|DOWN|mnprobe|root(0)` (core/policy/suspects.py)."""
    return proc.run(["sacctmgr", "--noheader", "--parsable2", "show", "event", f"Nodes={','.join(nodes)}",
                     f"Start={to_slurm(since)}", f"End={to_slurm(until)}",
                     f"format={','.join(EVENT_FIELDS)}"], timeout=60).stdout


def _sacct_argv(job_ids: Sequence[str], since: datetime, clusters: Sequence[str] = ()) -> list[str]:
    """ONE sacct call for all `job_ids` (array ids expand to their elements), steps and `-D`
    duplicates included. `-S` is explicit: without it sacct starts at midnight today.
    `--federation`: in a federation a job that started on a sibling cluster is only a REVOKED copy
    here; the run's own record comes with the federation's view (a no-op elsewhere, checked on 22.05).
    `clusters`: `-M a,b` and the Cluster column first (core/slurm/clusters.py); `--jobs` then names
    plain ids, each cluster's lines matched to its own."""
    fields = ("Cluster", *SACCT_FIELDS) if clusters else SACCT_FIELDS
    return ["sacct", *(["-M", ",".join(clusters)] if clusters else []), "--parsable2", "--noheader", "--duplicates",
            "--federation", f"--format={','.join(fields)}",
            f"--starttime={to_slurm(since)}", "--endtime=now",  # read in UTC: proc runs sacct with TZ=UTC
            f"--jobs={','.join(sorted({job_ref.plain(j) for j in job_ids}, key=int))}"]


def observe(job_ids: Sequence[str], since: datetime,
            wanted: Collection[tuple[str, int | None]] | None = None,
            timeout: float = 120, attempts: int = 4, step_tokens: Collection[str] = (),
            owners: Collection[str] = ()) -> Observed:
    """sacct's view of `job_ids`, folded while its output streams in (only `wanted` elements,
    and the steps of packed tasks named by `step_tokens`); the lines it skipped are added to the
    record `skipped_since` reads. `owners`: the uids of the users who submitted them. A step
    `CANCELLED by <uid>` under a FAILED job is the job failing when the uid is its own user's:
    in a campaign shared on one database a teammate's tick reads jobs it did not submit, and
    taking only itself as "own" read the same line as a cancel there and as a failure at home.
    Ids qualified by a cluster (`lab2:12`) make it one `sacct -M` over every cluster named, the
    plain ones read as the default cluster's."""
    if not job_ids:
        return Observed()
    how = reading()
    how = replace(how, own_cancellers=how.own_cancellers | frozenset(owners))
    named = sorted({c for c in map(job_ref.cluster_of, job_ids) if c})
    if named:
        default = cluster_name()
        clusters = sorted({*named, default}) if any(not job_ref.cluster_of(j) for j in job_ids) else named
        observed = proc.stream(_sacct_argv(job_ids, since, clusters), lambda lines: observe_clusters(
            lines, wanted, default, lambda rest, want: observe_jobs(rest, want, how, step_tokens)),
            timeout=timeout, attempts=attempts)
    else:
        observed = proc.stream(_sacct_argv(job_ids, since),
                               lambda lines: observe_jobs(lines, wanted, how, step_tokens),
                               timeout=timeout, attempts=attempts)
    _SKIPPED.extend(f"sacct: {note}" for note in observed.skipped)
    return observed
