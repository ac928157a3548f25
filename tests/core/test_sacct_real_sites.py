"""sacct text real sites print (issue 13 §2–3, issue 14): signals, cut pending lists, het jobs,
resizes, federation copies, lines nobody can read. The `*.txt` recordings come from the lab
cluster (Slurm 22.05.8, 2026-11-24); each case says how it was provoked. States the lab cannot
produce (REVOKED needs a federation, EXPEDITING is Slurm 25.11) are single hand-written lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.model.sacct_values import certain_indices, shell_exit
from campaignctl.core.model.slurm_states import State, classify_state
from campaignctl.core.slurm.sacct import SACCT_FIELDS, observe_jobs
from campaignctl.core.slurm.sacct_records import JobObservation, Reading

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"
Key = tuple[str, int | None]


def observe(name: str) -> dict[Key, JobObservation]:
    return observe_jobs((FIXTURES / name).read_text())


# --- signals: exit code as a shell reports it (128+N) --------------------------------------------
# fixture, key, state, exit code (shell), signal
SIGNALS = [
    # --wrap "srun python3 -c 'os.kill(os.getpid(), SIGTERM)'": job FAILED 15:0, derived 0:15, .0 CANCELLED 0:15
    ("signal_srun_step_self_term.txt", ("21", None), State.FAILED, 143, 15),
    # --wrap "srun sh -c 'exit 143'" (what the job-side runner does when its child dies by TERM):
    # ExitCode 15:0 (sacct subtracts 128), DerivedExitCode 143:0
    ("signal_runner_exit143.txt", ("23", None), State.FAILED, 143, 0),
    # --wrap "srun sleep 60", then `scancel --signal=TERM 24` (signals the steps): as 21
    ("signal_scancel_step_term.txt", ("24", None), State.FAILED, 143, 15),
    # --wrap "sleep 60", then `scancel --signal=TERM --batch 25`: the batch shell dies, FAILED 0:15
    ("signal_scancel_batch_term.txt", ("25", None), State.FAILED, 143, 15),
    # --wrap "srun python3 -c 'os.kill(os.getpid(), SIGKILL)'": FAILED 9:0, derived 0:9
    ("signal_srun_step_self_kill.txt", ("26", None), State.FAILED, 137, 9),
    # --wrap "python3 -c '…SIGTERM…'" with no srun: the shell exits 143, sacct prints 15:0, and
    # DerivedExitCode (steps only) is 0:0 — indistinguishable from `exit 15`, so it stays 15
    ("signal_batch_child_term.txt", ("22", None), State.FAILED, 15, 0),
    ("exit143_batch.txt", ("27", None), State.FAILED, 15, 0),  # --wrap "exit 143": the same line
    ("exit200_batch.txt", ("28", None), State.FAILED, 72, 0),  # --wrap "exit 200": 72:0
    # --wrap "srun sh -c 'exit 143'; exit 0": the job itself COMPLETED 0:0 (derived 143:0)
    ("exit143_srun_step_batch_ok.txt", ("30", None), State.COMPLETED, 0, 0),
    # --mem=100M, python allocating in the batch script: OUT_OF_MEMORY 0:125, and 125 is no signal
    ("oom_batch.txt", ("25", None), State.OUT_OF_MEMORY, 0, 125),
    ("failed.txt", ("22", None), State.FAILED, 3, 0),  # --wrap 'exit 3'
    # a campaignctl array (submitit, srun step .0, the job-side runner), attempt 1 of
    # test_sigterm_is_exit_143_and_retry_exit_codes_retries_it: element 0's program killed itself
    # with TERM, element 1 got `scancel --signal=TERM 118_1`; both FAILED 15:0, derived 143:0
    ("campaign_task_sigterm.txt", ("118", 0), State.FAILED, 143, 0),
    ("campaign_task_sigterm.txt", ("118", 1), State.FAILED, 143, 0),
]


@pytest.mark.parametrize(("fixture", "key", "state", "code", "sig"), SIGNALS,
                         ids=[c[0].removesuffix(".txt") for c in SIGNALS])
def test_exit_code_is_what_a_shell_reports(fixture: str, key: Key, state: State, code: int,
                                           sig: int) -> None:
    obs = observe(fixture)[key]
    assert obs.state is state
    assert (obs.exit_code, obs.exit_signal) == (code, sig)


@pytest.mark.parametrize(("exit_", "derived", "expected"), [
    ("0:15", "", (143, 15)), ("0:9", "0:0", (137, 9)), ("15:0", "0:15", (143, 15)),
    ("15:0", "143:0", (143, 0)), ("15:0", "0:0", (15, 0)), ("15:0", "", (15, 0)),
    ("1:0", "1:0", (1, 0)), ("0:125", "", (0, 125)), ("", "", (None, None)), ("0:0", "0:0", (0, 0)),
])
def test_shell_exit_table(exit_: str, derived: str, expected: tuple[int | None, int | None]) -> None:
    assert shell_exit(exit_, derived) == expected


def test_a_step_cancelled_by_root_inside_a_failed_job_is_the_job_failing() -> None:
    # --wrap "srun sleep 60", then root's `scancel 34.0`: .0 `CANCELLED by 0` 0:9, job FAILED 9:0.
    # Root, SlurmUser or the job's own user: Slurm means FAILED, killed by SIGKILL (issue 24)
    obs = observe("step_cancelled_by_uid.txt")[("34", None)]
    assert (obs.state, obs.cancelled_by, obs.exit_code) == (State.FAILED, None, 137)


def test_a_step_cancelled_by_another_uid_makes_the_job_cancelled() -> None:
    # the same text read by a tick for which uid 0 is someone else's: a person stopped the step
    text = (FIXTURES / "step_cancelled_by_uid.txt").read_text()
    obs = observe_jobs(text, reading=Reading(own_cancellers=frozenset({"1000"})))[("34", None)]
    assert (obs.state, obs.cancelled_by) == (State.CANCELLED, "0")
    assert obs.slurm_state == "FAILED"  # what Slurm said stays visible
    assert obs.exit_code == 137


def test_a_step_cancelled_by_signal_without_uid_stays_failed() -> None:
    # `scancel --signal=TERM` marks the step CANCELLED with no uid: the program died of TERM
    assert observe("signal_scancel_step_term.txt")[("24", None)].state is State.FAILED


# --- cut pending lists (SLURM_BITSTR_LEN) ---------------------------------------------------------

def test_cut_pending_list_is_read_as_far_as_it_is_certain_and_counted() -> None:
    # `sbatch --hold --array=0-99%1`, then `scontrol update JobId=1_N TimeLimit=5` for 19 scattered
    # N: sacct printed `1_[0-4,6-11,…,46-49,51-...%1]` (64 bytes), the split-off ones as lines 1_N
    text = (FIXTURES / "array_pending_truncated.txt").read_text()
    assert "51-...%1]" in text
    observed = observe_jobs(text)
    assert len(observed.skipped) == 1 and "SLURM_BITSTR_LEN" in observed.skipped[0]
    seen = {idx for _, idx in observed}
    assert seen == {*range(0, 5), *range(6, 12), 13, 14, *range(16, 20), *range(21, 25),
                    *range(26, 30), *range(31, 35), *range(36, 41), *range(42, 45), *range(46, 50)}
    assert 51 not in seen  # `51-...` may be 51 cut from 512: never invented


def test_full_pending_list_with_bitstr_len_zero_names_every_element() -> None:
    # the same array, `SLURM_BITSTR_LEN=0 sacct …` (97 had been split off in between)
    observed = observe("array_pending_full_list.txt")
    assert not observed.skipped  # type: ignore[attr-defined]
    split_off = {5, 12, 15, 20, 25, 30, 35, 41, 45, 50, 57, 63, 67, 70, 77, 88, 93, 96, 97}
    assert {idx for _, idx in observed} == set(range(100)) - split_off


@pytest.mark.parametrize(("text", "indices", "cut"), [
    ("0-4,6-11,...,69-...%1", (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11), True),  # issue 13's line
    ("0-2,51-...%1", (0, 1, 2), True),
    ("0-2,5%1", (0, 1, 2, 5), False),
    ("...", (), True),
])
def test_certain_indices(text: str, indices: tuple[int, ...], cut: bool) -> None:
    assert certain_indices(text) == (indices, cut)


# --- one run, not requeues -----------------------------------------------------------------------

def test_heterogeneous_components_are_one_run() -> None:
    # het.sh: `#SBATCH hetjob`, component 0 runs `true`, component 1 `exit 3`: 36+0 and 36+1
    observed = observe("het_job.txt")
    assert list(observed) == [("36", None)]
    obs = observed[("36", None)]
    assert obs.requeues == 0
    assert obs.state is State.FAILED and obs.exit_code == 3
    assert obs.step_states == ("batch:FAILED", "0:COMPLETED", "1:FAILED")


def test_a_live_het_component_speaks_for_the_job() -> None:
    text = (FIXTURES / "het_job.txt").read_text().replace("36+1|37|het-probe|batch|FAILED",
                                                          "36+1|37|het-probe|batch|RUNNING")
    assert observe_jobs(text)[("36", None)].state is State.RUNNING


def test_resizing_record_is_not_a_requeue() -> None:
    # -N2 job, `scontrol update JobId=38 NumNodes=1` while running: RESIZING record, then COMPLETED
    obs = observe("resizing.txt")[("38", None)]
    assert (obs.state, obs.requeues, obs.nodes) == (State.COMPLETED, 0, "node3")


# --- hand-written lines for what the lab cannot produce ------------------------------------------

BASE = dict(zip(SACCT_FIELDS, (FIXTURES / "failed.txt").read_text().splitlines()[0].split("|", len(SACCT_FIELDS) - 1),
                strict=True))


def line(**fields: str) -> str:
    assert set(fields) <= set(BASE)
    return "|".join({**BASE, **fields}[name] for name in SACCT_FIELDS) + "\n"


def test_revoked_sibling_copy_is_never_a_requeue_nor_the_run() -> None:
    # sacct(1) JOB STATE CODES: "RV REVOKED Sibling was removed from cluster due to other cluster
    # starting the job"; with --federation both copies of job 22 can be listed, in either order
    revoked = line(State="REVOKED", ExitCode="0:0", NodeList="None assigned")
    for text in (revoked + line(), line() + revoked):
        obs = observe_jobs(text)[("22", None)]
        assert (obs.state, obs.requeues) == (State.FAILED, 0)
    alone = observe_jobs(revoked)[("22", None)]
    assert alone.state is State.UNKNOWN  # the run is elsewhere: never acted on


def test_expediting_is_pending() -> None:
    assert classify_state("EXPEDITING").state is State.PENDING
    assert observe_jobs(line(State="EXPEDITING"))[("22", None)].state is State.PENDING


@pytest.mark.parametrize(("bad", "why"), [
    (line(Elapsed="12:xx:00"), "Elapsed"),
    (line(JobID="22_[1-"), "JobID"),
    (line(JobID="22_[5-x]"), "JobID"),
    (line(JobName="\ufffdt\ufffd"), "non-UTF-8"),  # a Latin-1 name decoded with replacement
    ("22|22|short\n", "fields"),
])
def test_an_unreadable_line_is_skipped_and_counted(bad: str, why: str) -> None:
    good = line(JobID="23", JobIDRaw="23")
    observed = observe_jobs(bad + good)
    assert list(observed) == [("23", None)]
    assert len(observed.skipped) == 1 and why in observed.skipped[0]
