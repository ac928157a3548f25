"""What `submit` checks before it records anything, so that a mistake in the spec ends the
command with nothing half-created: the paths the job will need, a pack no node could hold, and
Slurm's own answer (`sbatch --test-only`) for every array it would submit, first arrays and later
rungs alike."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

from campaignctl.adapters import slurm
from campaignctl.adapters.store import Store
from campaignctl.adapters.submission import ArraySubmission
from campaignctl.core.base.errors import SiteLimitError, SlurmTransientError, SlurmUnavailableError
from campaignctl.core.model.tracker import MLFLOW
from campaignctl.core.pack_plan import misfit
from campaignctl.core.resources import Resources
from campaignctl.core.slurm.plan import ArrayChunk
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.core.tick.starts import StartChunk, plan_starts
from campaignctl.services.dispatch import parameters
from campaignctl.services.start_facts import start_facts

REFUSED_HINT = ("nothing was submitted or recorded; give the resources the cluster has "
                "(sinfo -o '%P %G %m %l' lists partitions, GPUs, memory and time limits; "
                "sacctmgr show assoc user=$USER lists your accounts and QOS)")


def path_problems(spec: CampaignSpec) -> list[str]:
    """Paths every job would trip over: a missing `workdir` made every job exit 2 (cd failed) and
    be given up as "a bug in the program"; a `run_dir` under a file or an unwritable directory;
    a program named by path that is not there. Checked on the submit host, which shares the
    filesystem with the nodes at every site campaignctl is built for."""
    problems = []
    if not os.path.isdir(spec.workdir):
        problems.append(f"workdir: {spec.workdir} is not a directory (every job would start there)")
    else:
        problems += _run_dir_problems(spec.run_dir)
        program = spec.command[0] if spec.command else ""
        if "/" in program and "{" not in program:
            path = Path(spec.workdir, program)
            if not path.is_file():
                problems.append(f"command[0]: {program} is not a file (looked for {path})")
            elif not os.access(path, os.X_OK):
                problems.append(f"command[0]: {path} is not executable; `chmod +x` it or run it "
                                f"through its interpreter, e.g. [python, {program}]")
    return problems


def _run_dir_problems(run_dir: str) -> list[str]:
    existing = Path(run_dir)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return [f"run_dir: {run_dir} cannot be created: {existing} is not a directory"]
    if not os.access(existing, os.W_OK | os.X_OK):
        return [f"run_dir: {run_dir} cannot be created: {existing} is not writable by you"]
    return []


def program_note(spec: CampaignSpec) -> str:
    """A bare program name (`python`) is looked up on the job's PATH, the one captured now."""
    program = spec.command[0] if spec.command else ""
    if not program or "/" in program or "{" in program or shutil.which(program):
        return ""
    return (f"command[0]: {program!r} is not on this shell's PATH, which every attempt runs with; "
            "load its module or activate its environment before `submit`, or name it by path")


def tracker_note(spec: CampaignSpec) -> str:
    """`tracker: mlflow` makes each task's run from the job's Python, this one (the job's script
    runs it): without MLflow importable there, every attempt's program makes a run of its own."""
    if MLFLOW not in spec.trackers or importlib.util.find_spec("mlflow") is not None:
        return ""
    return (f"tracker: mlflow: MLflow is not importable by {sys.executable}, which makes each task's run "
            "in the job; install it there (pip install mlflow-skinny), or every attempt starts a new run")


def first_arrays(spec: CampaignSpec, store: Store | None) -> list[StartChunk]:
    """The arrays a new campaign's first tick would submit (sized and packed as it would)."""
    return plan_starts(start_facts(store, spec, place=False), spec.policy) if spec.first_tasks() else []


def pack_misfits(starts: list[StartChunk]) -> list[str]:
    """A pack whose element no node of the partition could run (`pack: {per_gpu: 4}` asks 4 CPUs
    a job, more than a 2-CPU node has): Slurm's own answer would be "Requested node configuration
    is not available", this says which number and what to change. One sinfo call, only for a pack."""
    nodes = functools.cache(slurm.node_shapes)
    return list({f"pack: {why}": None for s in starts if (shape := s.pack.shape) is not None
                 and (why := misfit(s.size.resources, shape, nodes(s.size.resources.partition))) is not None})


def slurm_refusals(spec: CampaignSpec, store: Store | None) -> list[str]:
    """One `sbatch --test-only` per distinct request: each first array's resources (the spec's,
    or right_size's per group) and each later rung's. Promotions reach Slurm much later, from
    cron, after the screening spend, so a rung Slurm would refuse is refused now. A request Slurm
    took once in this process is not asked again (slurm.refusal). A time limit above the
    partition's is not refused unless the cluster sets EnforcePartLimits: the job would pend."""
    asked: list[tuple[str, Resources, int]] = [(f"rungs[{rung.number}] ({rung.name})", rung.resources,
                                                 rung.number * spec.configs) for rung in spec.rungs[1:]]
    starts = first_arrays(spec, store)
    sizes = {(s.size.resources, s.size.tasks): s.size for s in starts}
    for size in sizes.values():
        label = f"tasks {size.tasks[0]}-{size.tasks[-1]}" if len(size.tasks) > 1 else f"task {size.tasks[0]}"
        asked.append((f"resources ({label})", size.resources, size.tasks[0]))
    refusals = pack_misfits(starts)
    for where, resources, task in asked:
        refused = refusal_of(spec, resources, task)
        if refused:
            refusals.append(f"{where}: Slurm would refuse its tasks: {refused}{_unknown_gpu_type(resources)}")
    return refusals


def refusal_of(spec: CampaignSpec, resources: Resources, task: int = 0) -> str | None:
    """`sbatch --test-only` of one element of task `task` asking `resources`: Slurm's refusal, or
    None when it would queue it (or the user's queue is full now, which says nothing of them).
    With `clusters:`, asked of each cluster as it names the request: refused only when every one
    refuses (placement sends the work where it is taken)."""
    chunk = ArrayChunk(task_indices=(task,), throttle=None)
    targets = [(c.name, c.resources(resources)) for c in spec.clusters] or [("", resources)]
    refusals = []
    with tempfile.TemporaryDirectory(prefix="campaignctl-test-only-") as tmp:
        for cluster, asked in targets:
            params = parameters(spec.name, asked, "TESTONLY", chunk, 0, spec.policy.slurm_requeue)
            script = Path(tmp) / f"request-{cluster or 'default'}.sbatch"
            script.write_text(ArraySubmission(Path(tmp), "TESTONLY", params).render())
            try:
                refused = slurm.refusal(str(script), cluster)
            except SiteLimitError:
                return None
            except (SlurmUnavailableError, SlurmTransientError) as exc:
                if not cluster:
                    raise
                refused = f"does not answer ({exc.message})"  # its slurmctld is down: placement skips it
            if not refused:
                return None
            refusals.append(f"{cluster}: {refused}" if cluster else refused)
    return "; ".join(refusals)


def _unknown_gpu_type(resources: Resources) -> str:
    """Slurm refuses a GPU type no node has with "Requested node configuration is not available",
    which does not say why: name the types the cluster has (one sinfo call, only then)."""
    if not resources.gpu_type:
        return ""
    known = sorted({n.gpu_type for n in slurm.gpu_nodes() if n.gpu_type})
    if resources.gpu_type in known:
        return ""
    return f" (no node has GPU type {resources.gpu_type!r}; the cluster's types: {', '.join(known) or 'none'})"
