"""Array submission: submitit's sbatch renderer, our own pickled payloads and job-side
bootstrap (adapters/job_main.py) and our own sbatch call.

Why not `SlurmExecutor.map_array` as is: it runs sbatch itself (outside our one subprocess choke
point, without retries) and moves each element's pickle into place only *after* sbatch returns,
so a crash in between leaves a job that starts, waits 60 s for a pickle and dies. We stage the
pickles under deterministic names, submit held, record the job id, move the pickles, then release.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import submitit

from campaignctl.adapters import slurm
from campaignctl.adapters.inline_pack import run_inline
from campaignctl.adapters.job_main import Call, dump_call, payload_path
from campaignctl.adapters.pack_runner import run_pack
from campaignctl.adapters.paths import private_dir, private_run_tree, write_atomic
from campaignctl.adapters.runner import run_task
from campaignctl.core.base.errors import SlurmUnavailableError
from campaignctl.core.pack_plan import plan_packs
from campaignctl.core.slurm.plan import ArrayChunk
from campaignctl.core.spec.spec import Resources
from campaignctl.core.task_launch import TaskLaunch

# signal_delay_s 0 (USR2 at the limit itself, useless next to SIGTERM) stands for "no --signal
# line": see Resources.warning_signal_delay_s
NO_WARNING_SIGNAL = 0

def executor_parameters(resources: Resources, job_name: str, comment: str,
                        chunk: ArrayChunk, requeue: bool = False, after: str = "") -> dict[str, Any]:
    """submitit parameters for one array chunk. sbatch 22.05 has no --cpu-bind: binding is
    given to the `srun` that launches the task (submitit's srun_args).

    CPUs: since 22.05 srun ignores SLURM_CPUS_PER_TASK (without help a -c2 task was bound to ONE
    cpu here) and reads SRUN_CPUS_PER_TASK instead. The script exports it from the job's own
    SLURM_CPUS_PER_TASK rather than hard-coding `srun --cpus-per-task=N`, so a pending element
    resized with `scontrol update NumCPUs=2 CPUsPerTask=2` really runs on 2 CPUs (checked on the
    lab cluster: Cpus_allowed_list 0-1). `--ntasks=1`: in a 2-CPU allocation `srun
    --cpus-per-task=1` would start TWO copies of the task."""
    params: dict[str, Any] = {
        "job_name": job_name, "comment": comment, "time": resources.time_min,
        "cpus_per_task": resources.cpus_per_task, "mem": f"{resources.mem_mb}M",
        "stderr_to_stdout": True, "map_count": chunk.elements, "wckey": None,
        # --no-requeue unless the policy asks for Slurm-side requeue: the cluster's own
        # JobRequeue/PreemptMode=REQUEUE must not race the campaign's policy.
        "additional_parameters": {"array": chunk.array_spec,
                                  "requeue" if requeue else "no_requeue": True,
                                  # Slurm starts it once that element ended in any state; a
                                  # dependency on a job slurmctld has already forgotten (past
                                  # MinJobAge) is satisfied at once (sbatch(1), --dependency)
                                  **({"dependency": f"afterany:{after}"} if after else {})},
    }
    optional = {"partition": resources.partition, "gres": resources.gres, "account": resources.account,
                "qos": resources.qos, "constraint": resources.constraint, "exclude": resources.exclude}
    params.update({k: v for k, v in optional.items() if v})
    params["setup"] = ["export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK"]
    srun_args = _spread(resources, params) if resources.distributed else ["--ntasks=1"]
    if resources.cpu_bind:
        srun_args.append(f"--cpu-bind={resources.cpu_bind}")
    if resources.gpu_bind and resources.gpus:
        srun_args.append(f"--gpu-bind={resources.gpu_bind}")
    params["srun_args"] = srun_args
    params["signal_delay_s"] = resources.warning_signal_delay_s or NO_WARNING_SIGNAL
    return params


def _spread(resources: Resources, params: dict[str, Any]) -> list[str]:
    """A multi-node attempt: one array element holding `nodes` nodes, `--gres`, `--mem` and
    `--cpus-per-task` per node (sbatch's meaning), and its srun step starting the runner on
    every Slurm task (core/model/rendezvous.py: one per process, or one per node for torchrun)."""
    per_node = resources.slurm_tasks_per_node
    params.update(nodes=resources.nodes, ntasks_per_node=per_node, cpus_per_task=resources.slurm_cpus_per_task)
    return [f"--ntasks={resources.nodes * per_node}", f"--ntasks-per-node={per_node}"]


def element_calls(launches: Sequence[TaskLaunch], chunk: ArrayChunk,
                  each: Resources | None = None) -> list[Call]:
    """What each array element runs: one task's runner, or a pack of them (`each`: one task's
    resources) side by side in steps of their own (adapters/pack_runner.py), or as plain
    processes (adapters/inline_pack.py)."""
    if chunk.pack is None:
        return [(run_task, (launch,)) for launch in launches]
    assert each is not None, "a packed chunk's steps are sized from each task's resources"
    size = chunk.pack.per_element
    runner = run_inline if chunk.pack.processes else run_pack
    return [(runner, (pack, list(launches[n * size:n * size + len(pack.tasks)])))
            for n, pack in enumerate(plan_packs(chunk.task_indices, each, chunk.pack))]


class ArraySubmission:
    """One array chunk on disk under `folder`: script, staged payloads, delivered payloads."""

    def __init__(self, folder: Path, token: str, parameters: dict[str, Any], group: str | None = None) -> None:
        self.folder = folder
        self.token = token
        self.group = group  # a shared campaign's Unix group: the folders are its (paths.private_run_tree)
        if shutil.which("srun") is None:  # submitit's SlurmExecutor raises a bare RuntimeError (exit 1)
            raise SlurmUnavailableError("srun is not on PATH: the job script starts each task with srun",
                                        "load your site's Slurm module (or add the directory of sbatch and "
                                        "srun to PATH) and run the command again")
        self.executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
        self.executor.update_parameters(**{k: v for k, v in parameters.items() if k != "map_count"})
        self.executor.parameters["map_count"] = parameters["map_count"]

    @property
    def script_path(self) -> Path:
        return self.folder / f"{self.token}.sbatch"

    @property
    def staging_dir(self) -> Path:
        return self.folder / "staging" / self.token

    def render(self) -> str:
        command = f"{shlex.quote(sys.executable)} -u -m campaignctl.adapters.job_main {shlex.quote(str(self.folder))}"
        text = self.executor._make_submission_file_text(command, self.token)
        if self.executor.parameters.get("signal_delay_s") == NO_WARNING_SIGNAL:  # submitit always writes one
            text = "".join(line for line in text.splitlines(keepends=True)
                           if not line.startswith("#SBATCH --signal="))
        return text

    def stage(self, calls: Sequence[Call]) -> None:
        """Write the script and one pickled call per array index (idempotent)."""
        private_run_tree(self.folder.parent, self.group)
        private_dir(self.staging_dir, self.group)
        for index, call in enumerate(calls):
            payload = self.staging_dir / f"{index}.pkl"
            dump_call(call, payload)
            os.chmod(payload, 0o600)  # a pickle is code the job runs as the owner (the folder is 0700 too)
        write_atomic(self.script_path, self.render(), mode=0o600)

    def submit_held(self, cluster: str = "") -> str:
        return slurm.sbatch_held(str(self.script_path), self.executor.parameters["job_name"], cluster)

    def deliver(self, job_id: str, size: int) -> None:
        """Move staged payloads to where each element looks for its own (idempotent)."""
        for index in range(size):
            target = payload_path(self.folder, f"{job_id}_{index}")
            staged = self.staging_dir / f"{index}.pkl"
            if staged.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                staged.replace(target)
        shutil.rmtree(self.staging_dir, ignore_errors=True)
