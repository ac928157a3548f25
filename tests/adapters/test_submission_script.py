"""The generated sbatch script, compared with a golden file (delete it to regenerate)."""

from __future__ import annotations

import sys
from pathlib import Path

from campaignctl.adapters.submission import ArraySubmission, executor_parameters
from campaignctl.core.slurm.plan import ArrayChunk
from campaignctl.core.spec.spec import Resources

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "array.sbatch"


def render() -> str:
    resources = Resources(partition="batch", gpus=1, gpu_type="a100", cpus_per_task=2, mem_mb=4096,
                          time_min=120, cpu_bind="cores", gpu_bind="closest", exclude="node3")
    chunk = ArrayChunk(task_indices=tuple(range(10)), throttle=4)
    params = executor_parameters(resources, "cc.0123456789ab.lr-sweep",
                                 "campaignctl campaign=lr-sweep revision=1 token=0123456789ab", chunk)
    text = ArraySubmission(Path("/runs/lr-sweep/slurm"), "0123456789ab", params).render()
    return text.replace(sys.executable, "PYTHON")


def test_array_script_matches_golden_file() -> None:
    text = render()
    if not GOLDEN.exists():
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), f"generated script changed; delete {GOLDEN} to regenerate and review the diff"


def test_script_carries_binding_gres_token_and_no_requeue() -> None:
    text = render()
    for line in ("#SBATCH --array=0-9%4", "#SBATCH --gres=gpu:a100:1", "#SBATCH --cpus-per-task=2",
                 "#SBATCH --mem=4096M", "#SBATCH --time=120", "#SBATCH --no-requeue",
                 "#SBATCH --job-name=cc.0123456789ab.lr-sweep", "#SBATCH --exclude=node3"):
        assert line in text.splitlines()
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    assert "--cpu-bind=cores" in srun and "--gpu-bind=closest" in srun  # sbatch has no --cpu-bind
    assert "--wckey" not in text


def script_for(time_min: int) -> list[str]:
    resources = Resources(time_min=time_min)
    chunk = ArrayChunk(task_indices=(0, 1), throttle=None)
    params = executor_parameters(resources, "cc.t.n", "campaignctl campaign=n", chunk)
    return ArraySubmission(Path("/runs/n/slurm"), "tok", params).render().splitlines()


def test_the_warning_signal_never_falls_due_while_a_short_task_is_starting() -> None:
    # Slurm may send --signal up to 60 s early: USR2@90 on a 2-minute job could arrive at once
    signals = {t: [line for line in script_for(t) if line.startswith("#SBATCH --signal")] for t in (1, 2, 3, 4, 600)}
    assert signals[1] == signals[2] == []
    assert signals[3] == ["#SBATCH --signal=USR2@60"]
    assert signals[4] == signals[600] == ["#SBATCH --signal=USR2@90"]
    assert any(line.startswith("#SBATCH --time=1") for line in script_for(1))  # nothing else dropped


def multinode_script(launcher: str) -> list[str]:
    resources = Resources(nodes=2, tasks_per_node=4, gpus=4, cpus_per_task=2, launcher=launcher)
    chunk = ArrayChunk(task_indices=(0,), throttle=None)
    params = executor_parameters(resources, "cc.t.n", "campaignctl campaign=n", chunk)
    return ArraySubmission(Path("/runs/n/slurm"), "tok", params).render().splitlines()


def test_a_multi_node_element_holds_its_nodes_and_starts_one_runner_per_process() -> None:
    lines = multinode_script("srun")
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --cpus-per-task=2",
                 "#SBATCH --gres=gpu:4", "#SBATCH --array=0-0"):
        assert line in lines
    srun = next(line for line in lines if line.startswith("srun "))
    assert "--ntasks=8 --ntasks-per-node=4" in srun and "--ntasks=1 " not in srun


def test_torchrun_is_one_task_per_node_holding_every_processs_cpus() -> None:
    lines = multinode_script("torchrun")
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=8"):
        assert line in lines
    assert "--ntasks=2 --ntasks-per-node=1" in next(line for line in lines if line.startswith("srun "))
