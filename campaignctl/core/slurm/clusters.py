"""Reading what Slurm's clients print when asked about several clusters at once (`-M a,b`). Pure.

Tested on the lab's two clusters behind one slurmdbd, Slurm 22.05 and 24.11 (scripts/slurmlab):
- `squeue -M a,b` heads each cluster's lines with `CLUSTER: a` and that cluster's column header
  (also without --noheader's omission: --noheader drops both); a cluster whose slurmctld is down is
  left out without a word and squeue exits 0 — once slurmdbd has taken its deregistration. Before
  that (a slurmctld just stopped, or killed without deregistering) squeue prints the heading, then
  fails to reach it: no column header, `slurm_load_jobs error: …` on stderr, exit 1 (squeue.c's
  `_multi_cluster` prints the heading before it asks). Recorded with a hung slurmctld (`kill
  -STOP`, tests/fixtures/clusters); read as an answer with no job, a stopping slurmctld's running
  tasks were kept RUNNING instead of UNKNOWN (CI run 50, 24.11);
- `sacct -M a,b` reads slurmdbd, which answers for a cluster whose slurmctld is down (its jobs as
  they were last recorded): the `Cluster` column (first here) says whose each line is;
- `sbatch -M a --test-only` prints `sbatch: Job 4 to start at 2026-11-30T01:34:46 using 1
  processors on nodes nodeb1 in partition batch` on stderr and exits 0, or `allocation failure:
  Requested node configuration is not available` (every node of the partition drained) and 1, or
  `sbatch: error: 'a' can't be reached now, or it is an invalid entry for --cluster.`"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

from campaignctl.core.base.clock import from_slurm
from campaignctl.core.model.records import HistoryRow
from campaignctl.core.model.slurm_states import State
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.sacct import Key, Observed
from campaignctl.core.slurm.sacct_records import JobObservation

HEADING = "CLUSTER: "
_STARTS = re.compile(r"\bJob \d+ to start at (\S+)")
UNREACHABLE = "does not answer"  # predicted_start's why-not for a cluster whose slurmctld is down


def split_by_cluster(text: str) -> dict[str, list[str]]:
    """`squeue -M a,b` output → its lines by cluster, headings and column headers dropped; every
    cluster that answered is a key, with no lines when it has no job of ours. A heading without a
    column header under it is a cluster squeue could not reach: not a key."""
    out: dict[str, list[str]] = {}
    lines: list[str] | None = None
    heading: str | None = None  # a cluster whose column header is the next line, if it answered
    for line in text.splitlines():
        if line.startswith(HEADING):
            heading, lines = line[len(HEADING):].strip(), None
        elif heading is not None:
            lines = out.setdefault(heading, []) if line.strip() else None  # blank: it did not answer
            heading = None
        elif lines is not None and line.strip():
            lines.append(line)
    return out


def test_only_start(returncode: int, stderr: str) -> tuple[str | None, str]:
    """`sbatch -M c --test-only`'s answer → (the predicted start as UTC ISO text, '') or (None, why)."""
    if returncode == 0:
        match = _STARTS.search(stderr)
        when = from_slurm(match[1]) if match else None
        return (when, "") if when else (None, f"sbatch --test-only printed no start time: {stderr.strip()[:200]}")
    if "can't be reached" in stderr or "Unable to contact" in stderr:
        return None, UNREACHABLE
    refusals = [line.split("failure:", 1)[-1].strip() for line in stderr.splitlines() if "failure:" in line]
    return None, (refusals[-1] if refusals else stderr.strip().splitlines()[-1][:200] if stderr.strip()
                  else f"sbatch --test-only exited {returncode}")


def lines_by_cluster(lines: Iterable[str]) -> dict[str, list[str]]:
    """`sacct -M a,b --format=Cluster,…` lines → the rest of each line, by its first field."""
    out: dict[str, list[str]] = {}
    for line in lines:
        cluster, sep, rest = line.partition("|")
        if sep:
            out.setdefault(cluster, []).append(rest)
    return out


def observe_clusters(lines: Iterable[str], wanted: Collection[Key] | None, default: str,
                     observe: Callable[[Iterator[str], Collection[Key] | None], Observed]) -> Observed:
    """One `sacct -M a,b` → one Observed keyed as `wanted` is: a qualified id (`lab2:12`) by the
    lines of its cluster, a plain one by the lines of `default` (the cluster SLURM_CONF names). Each
    cluster's lines are folded apart (`observe`: core/slurm/sacct.observe_jobs), so job 12 of lab and
    job 12 of lab2 never meet. `wanted` None: every element, keyed by qualified ids."""
    wanted = set(wanted) if wanted is not None else None
    plain_wanted: dict[str, set[Key]] = {}
    for job, index in wanted or ():
        cluster, plain = job_ref.split(job)
        plain_wanted.setdefault(cluster or default, set()).add((plain, index))
    out = Observed()
    for cluster, rest in lines_by_cluster(lines).items():
        want = plain_wanted.get(cluster)
        if wanted is not None and not want:
            continue
        seen = observe(iter(rest), want)
        out.skipped += [f"{cluster}: {why}" for why in seen.skipped]
        for (plain, index), obs in seen.items():
            keys = [(job_ref.qualified(cluster, plain), index)] + ([(plain, index)] if cluster == default else [])
            for key in keys:
                if wanted is None or key in wanted:
                    out[key] = obs
                    if wanted is None:
                        break
        out.steps.update(seen.steps)
    return out


def unheard_as_unknown(rows: Iterable[HistoryRow], observed: Mapping[Key, JobObservation], unheard: Collection[str],
                       default: str) -> Mapping[Key, JobObservation]:
    """`observed`, where the attempts on a cluster that did not answer squeue this tick are UNKNOWN:
    slurmdbd still answers sacct for them with what it last heard (RUNNING, PENDING), while their
    slurmctld, which alone would learn of their end, is gone. UNKNOWN without a moment they went
    missing: no rule starts counting them lost, nothing of them is resubmitted, and the first tick
    their cluster answers again reads them as they are (a job that ran on meanwhile is not run twice)."""
    override: dict[Key, JobObservation] = {}
    for row in rows:
        if not row.job_id or (job_ref.cluster_of(row.job_id) or default) not in unheard:
            continue
        key = (row.job_id.partition("_")[0], row.array_index)
        override[key] = JobObservation(key, State.UNKNOWN, row.slurm_state or "UNKNOWN", None, None, None,
                                       row.elapsed_s, row.nodes, None, None, row.max_rss)
    return {**observed, **override} if override else observed
