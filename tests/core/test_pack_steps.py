"""A packed task's fate from its own step (core/pack_steps.py). The lines are the lab's real
`srun` step OOM (tests/fixtures/sacct/oom_srun_step.txt, job 31) read as a pack of two tasks:
its `.0` step named by the first task's token, and a copy of it as `.1`, the neighbour that
completed. A recording of a real pack replaces them once the runner starts packs."""

from __future__ import annotations

from pathlib import Path

from campaignctl.core.pack_steps import step_fates
from campaignctl.core.slurm_states import State

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sacct" / "oom_srun_step.txt"


def pack_lines() -> list[str]:
    job, batch, step = FIXTURE.read_text().splitlines()
    oom = step.replace("31.0|31.0|python3|", "31_0.0|32.0|abc123.0|")
    done = step.replace("31.0|31.0|python3|", "31_0.1|32.1|abc123.1|").replace("OUT_OF_MEMORY|0:125",
                                                                             "COMPLETED|0:0")
    return [job.replace("31|31|", "31_0|32|"), batch.replace("31.batch|31.batch|", "31_0.batch|32.batch|"), oom, done]


def test_each_packed_task_reads_its_own_step_and_the_neighbour_s_oom_is_not_its_own() -> None:
    fates = step_fates(pack_lines(), {"abc123.0", "abc123.1", "abc123.2"})
    assert set(fates) == {"abc123.0", "abc123.1"}  # .2 has no step yet
    assert (fates["abc123.0"].state, fates["abc123.0"].job_id) == (State.OUT_OF_MEMORY, "31_0.0")
    assert (fates["abc123.1"].state, fates["abc123.1"].exit_code, fates["abc123.1"].elapsed_s) == (
        State.COMPLETED, 0, 1)


def test_the_pack_s_own_line_and_unreadable_lines_are_passed_over() -> None:
    assert step_fates([*pack_lines(), "garbage"], {"fx-oom-srun"}) == {}  # the allocation line's name
