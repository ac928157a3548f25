"""sacct text → observations, against real recordings from the lab cluster (Slurm 22.05).

Every file in tests/fixtures/sacct was produced by the sacct call of `slurm.observe([job], since)` on the real
cluster after the job (or the run under test) had reached its state; see each case's comment for
how it was provoked. The hand-written single lines at the bottom cover quirks that are hard to
provoke on demand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.core.model.sacct_values import expand_index_range, runner_exit, shell_exit
from campaignctl.core.model.slurm_states import State, classify_state
from campaignctl.core.slurm.sacct import SACCT_FIELDS, observe_jobs, parse_sacct, parse_sacct_line
from campaignctl.core.slurm.sacct_records import JobObservation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"
ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.txt"))

Key = tuple[str, int | None]


def observe(name: str) -> dict[Key, JobObservation]:
    return observe_jobs((FIXTURES / name).read_text())


# --- recordings: one row per (fixture, job key) --------------------------------------------------
# fixture, key, state, raw slurm state, cancelled_by, (exit code, signal), elapsed s, node, step states
CASES = [
    # sbatch --wrap 'exit 3'
    ("failed.txt", ("22", None), State.FAILED, "FAILED", None, (3, 0), 0, "node1",
     ("batch:FAILED",)),
    # scancel of a running job: the job line says 'CANCELLED by 0', its .batch step CANCELLED 0:15
    ("cancelled.txt", ("23", None), State.CANCELLED, "CANCELLED by 0", "0", (0, 0), 3, "node1",
     ("batch:CANCELLED",)),
    # scontrol update TimeLimit=0 on a running job: TIMEOUT 0:0, the .batch step CANCELLED 0:15
    ("timeout.txt", ("29", None), State.TIMEOUT, "TIMEOUT", None, (0, 0), 24, "node2",
     ("batch:CANCELLED",)),
    # --mem=100M, python allocating 50 MiB chunks in the batch script
    ("oom_batch.txt", ("25", None), State.OUT_OF_MEMORY, "OUT_OF_MEMORY", None, (0, 125), 0, "node1",
     ("batch:OUT_OF_MEMORY",)),
    # --mem=150M --wrap "srun python3 -c 'bytearray(300*2**20)'": the job line says FAILED 1:0,
    # only step .0 says OUT_OF_MEMORY 0:125; the domain state comes from the step
    ("oom_srun_step.txt", ("31", None), State.OUT_OF_MEMORY, "FAILED", None, (1, 0), 1, "node1",
     ("batch:FAILED", "0:OUT_OF_MEMORY")),
    # 2 nodes × 2 tasks, --mem=300M per node, `srun --ntasks=4`, task 3 (on node2) allocating
    # 2 GB: one rank's OOM; the step is OUT_OF_MEMORY, and so is the task (retried with more memory)
    ("oom_one_rank_two_nodes.txt", ("4712", None), State.OUT_OF_MEMORY, "FAILED", None, (1, 0), 5, "node[1-2]",
     ("batch:FAILED", "0:OUT_OF_MEMORY")),
    # the same layout, node2 set DOWN 5 s in: NODE_FAIL on the whole allocation, no word of which
    # node failed (core/policy/suspects.py asks the accounting database's node events)
    ("node_fail_two_nodes.txt", ("4692", None), State.NODE_FAIL, "NODE_FAIL", None, (0, 0), 5, "node[1-2]",
     ("batch:CANCELLED", "0:CANCELLED")),
    # --no-requeue job on node3, then scontrol update NodeName=node3 State=DOWN; .batch has no ExitCode
    ("node_fail.txt", ("32", None), State.NODE_FAIL, "NODE_FAIL", None, (0, 0), 5, "node3",
     ("batch:CANCELLED",)),
    # batch job on node2 preempted by a `-p high` job, requeued, running again (sacct -D: the
    # PREEMPTED run, then the RUNNING one); the current run wins, and its `0:0` is no exit code yet
    ("preempted_requeued.txt", ("33", None), State.RUNNING, "RUNNING", None, (None, None), 10, "node2",
     ("batch:RUNNING",)),
    # the same job after `scancel` of its second run
    ("preempted_requeued_cancelled.txt", ("33", None), State.CANCELLED, "CANCELLED by 0", "0", (0, 0),
     11, "node2", ("batch:CANCELLED",)),
    # `scontrol requeue` of a running job, second run completed: REQUEUED run, then COMPLETED
    ("requeued_completed.txt", ("69", None), State.COMPLETED, "COMPLETED", None, (0, 0), 2, "node1",
     ("batch:COMPLETED",)),
    # node3 set DOWN under a requeueable job: NODE_FAIL run, then the requeued run COMPLETED
    ("node_fail_requeued_completed.txt", ("70", None), State.COMPLETED, "COMPLETED", None, (0, 0), 2,
     "node3", ("batch:COMPLETED",)),
    # --array=0-3, index 1 exits 2, index 2 scancelled while running; the last element's
    # JobIDRaw is the array's own id (60_3|60)
    ("array_mixed.txt", ("60", 0), State.COMPLETED, "COMPLETED", None, (0, 0), 3, "node1",
     ("batch:COMPLETED",)),
    ("array_mixed.txt", ("60", 1), State.FAILED, "FAILED", None, (2, 0), 1, "node1",
     ("batch:FAILED",)),
    ("array_mixed.txt", ("60", 2), State.CANCELLED, "CANCELLED by 0", "0", (0, 0), 5, "node2",
     ("batch:CANCELLED",)),
    ("array_mixed.txt", ("60", 3), State.COMPLETED, "COMPLETED", None, (0, 0), 3, "node2",
     ("batch:COMPLETED",)),
    # 8-task campaignctl array (srun step .0 per task), all COMPLETED; 5_7|5 carries the array id
    ("array_completed.txt", ("5", 0), State.COMPLETED, "COMPLETED", None, (0, 0), 5, "node1",
     ("batch:COMPLETED", "0:COMPLETED")),
    ("array_completed.txt", ("5", 7), State.COMPLETED, "COMPLETED", None, (0, 0), 4, "node4",
     ("batch:COMPLETED", "0:COMPLETED")),
]


@pytest.mark.parametrize(
    ("fixture", "key", "state", "raw", "cancelled_by", "exit_", "elapsed", "node", "steps"),
    CASES, ids=[f"{c[0].removesuffix('.txt')}-{c[1][1]}" for c in CASES])
def test_recorded_job_observation(fixture: str, key: Key, state: State, raw: str,
                                  cancelled_by: str | None, exit_: tuple[int | None, int | None], elapsed: int,
                                  node: str, steps: tuple[str, ...]) -> None:
    obs = observe(fixture)[key]
    assert obs.key == key
    assert obs.state is state
    assert obs.slurm_state == raw
    assert obs.cancelled_by == cancelled_by
    assert (obs.exit_code, obs.exit_signal) == exit_
    assert obs.elapsed_s == elapsed
    assert obs.nodes == node
    assert obs.step_states == steps


@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_every_recorded_line_parses(fixture: str) -> None:
    """No real line is dropped as malformed: the format and the parser agree."""
    lines = [line for line in (FIXTURES / fixture).read_text().splitlines() if line.strip()]
    assert lines
    assert all(line.count("|") == len(SACCT_FIELDS) - 1 for line in lines)
    assert len(list(parse_sacct("\n".join(lines)))) == len(lines)


def test_recordings_cover_the_expected_set() -> None:
    assert {
        "array_completed.txt", "failed.txt", "cancelled.txt", "timeout.txt", "oom_batch.txt",
        "oom_srun_step.txt", "node_fail.txt", "preempted_requeued.txt", "array_pending_throttled.txt",
        "array_mixed.txt",
    } <= set(ALL_FIXTURES)


@pytest.mark.parametrize(("fixture", "keys"), [
    ("failed.txt", [("22", None)]),
    ("cancelled.txt", [("23", None)]),
    ("timeout.txt", [("29", None)]),
    ("oom_batch.txt", [("25", None)]),
    ("oom_srun_step.txt", [("31", None)]),
    ("node_fail.txt", [("32", None)]),
    ("preempted_requeued.txt", [("33", None)]),
    ("requeued_completed.txt", [("69", None)]),
    ("array_mixed.txt", [("60", i) for i in range(4)]),
    ("array_completed.txt", [("5", i) for i in range(8)]),
    ("array_pending_throttled.txt", [("54", i) for i in range(10)]),
])
def test_one_observation_per_job_or_element(fixture: str, keys: list[Key]) -> None:
    """Steps and earlier (-D) runs fold into their job; nothing else appears."""
    assert sorted(observe(fixture), key=str) == sorted(keys, key=str)


def test_pending_throttled_array_expands_to_its_ten_indices() -> None:
    # sacct prints ONE line for the held array: `54_[0-9%2]|54|…|PENDING|0:0|…|None assigned|…`
    rows = list(parse_sacct((FIXTURES / "array_pending_throttled.txt").read_text()))
    assert len(rows) == 1
    assert rows[0].job_id == "54_[0-9%2]"
    assert rows[0].array_index is None
    assert rows[0].pending_indices == tuple(range(10))
    observed = observe("array_pending_throttled.txt")
    assert sorted(idx for _, idx in observed if idx is not None) == list(range(10))
    for obs in observed.values():
        assert obs.state is State.PENDING
        assert obs.slurm_state == "PENDING"
        assert obs.start is None and obs.end is None  # sacct prints 'Unknown'
        assert obs.step_states == ()
        assert obs.requeues == 0


def test_array_mixed_states_by_index() -> None:
    observed = observe("array_mixed.txt")
    assert {idx: obs.state for (_, idx), obs in observed.items()} == {
        0: State.COMPLETED, 1: State.FAILED, 2: State.CANCELLED, 3: State.COMPLETED}


def test_array_element_keyed_by_jobid_not_jobidraw() -> None:
    """`5_7|5|…`: the last element's JobIDRaw is the array id, the key still says index 7."""
    rows = list(parse_sacct((FIXTURES / "array_completed.txt").read_text()))
    last = [r for r in rows if r.job_id == "5_7"]
    assert len(last) == 1
    assert (last[0].array_job_id, last[0].array_index) == ("5", 7)
    assert last[0].comment == "campaignctl campaign=demo revision=1 token=6c22f2a6156d"
    observed = observe("array_completed.txt")
    assert all(obs.state is State.COMPLETED for obs in observed.values())
    assert [observed[("5", i)].nodes for i in range(8)] == ["node1", "node1", "node2", "node2",
                                                          "node3", "node3", "node4", "node4"]
    assert observed[("5", 0)].max_rss == "23832K"  # the largest step MaxRSS (.0), not .batch's 4056K


def test_srun_step_oom_is_classified_from_the_step() -> None:
    rows = list(parse_sacct((FIXTURES / "oom_srun_step.txt").read_text()))
    assert [(r.step, r.state.state, r.exit_code, r.exit_signal) for r in rows] == [
        (None, State.FAILED, 1, 0), ("batch", State.FAILED, 1, 0), ("0", State.OUT_OF_MEMORY, 0, 125)]
    assert observe("oom_srun_step.txt")[("31", None)].state is State.OUT_OF_MEMORY


def test_timeout_after_timelimit_update_has_no_timelimit() -> None:
    """After `scontrol update TimeLimit=0` sacct prints an empty Timelimit; others print 00:05:00."""
    (job, batch) = parse_sacct((FIXTURES / "timeout.txt").read_text())
    assert job.timelimit_s is None
    assert batch.state.state is State.CANCELLED and (batch.exit_code, batch.exit_signal) == (0, 15)
    (failed, _) = parse_sacct((FIXTURES / "failed.txt").read_text())
    assert failed.timelimit_s == 300


def test_node_fail_batch_step_has_no_exit_code() -> None:
    (_, batch) = parse_sacct((FIXTURES / "node_fail.txt").read_text())
    assert batch.step == "batch"
    assert batch.state.state is State.CANCELLED
    assert (batch.exit_code, batch.exit_signal) == (None, None)


@pytest.mark.parametrize(("fixture", "earlier"), [
    ("preempted_requeued.txt", "PREEMPTED"),
    ("preempted_requeued_cancelled.txt", "PREEMPTED"),
    ("requeued_completed.txt", "REQUEUED"),
    ("node_fail_requeued_completed.txt", "NODE_FAIL"),
])
def test_duplicates_list_the_earlier_run_first(fixture: str, earlier: str) -> None:
    allocations = [r for r in parse_sacct((FIXTURES / fixture).read_text()) if r.step is None]
    assert len(allocations) == 2
    assert allocations[0].state.raw == earlier
    assert allocations[0].job_id == allocations[1].job_id


@pytest.mark.parametrize(("fixture", "key", "requeues"), [
    ("requeued_completed.txt", ("69", None), 1),
    ("preempted_requeued.txt", ("33", None), 1),
    ("preempted_requeued_cancelled.txt", ("33", None), 1),
    ("node_fail_requeued_completed.txt", ("70", None), 1),
    ("node_fail.txt", ("32", None), 0),
    ("failed.txt", ("22", None), 0),
    ("array_mixed.txt", ("60", 2), 0),
])
def test_requeue_count(fixture: str, key: Key, requeues: int) -> None:
    assert observe(fixture)[key].requeues == requeues


# --- hand-written single lines --------------------------------------------------------------------

BASE = {
    "JobID": "7", "JobIDRaw": "7", "JobName": "t", "Partition": "batch", "State": "COMPLETED",
    "ExitCode": "0:0", "DerivedExitCode": "0:0", "Elapsed": "00:00:05", "Timelimit": "00:05:00", "NodeList": "node1",
    "AllocTRES": "billing=1,cpu=1,mem=100M,node=1", "ReqMem": "100M", "MaxRSS": "",
    "Submit": "2026-11-21T12:00:00", "Start": "2026-11-21T12:00:01", "End": "2026-11-21T12:00:06",
    "ConsumedEnergyRaw": "0",
    "Comment": "",
}


def line(**fields: str) -> str:
    assert set(fields) <= set(BASE)
    return "|".join({**BASE, **fields}[name] for name in SACCT_FIELDS)


def only(text: str) -> JobObservation:
    observed = observe_jobs(text)
    assert len(observed) == 1
    return next(iter(observed.values()))


def test_base_line_round_trips() -> None:
    row = parse_sacct_line(line())
    assert row is not None
    assert (row.job_id, row.array_job_id, row.array_index, row.step) == ("7", "7", None, None)
    assert row.timelimit_s == 300 and row.elapsed_s == 5


@pytest.mark.parametrize(("raw", "state", "by"), [
    ("RUNNING+", State.RUNNING, None),
    ("CANCELLED by 0", State.CANCELLED, "0"),
    ("CANCELLED by 1234", State.CANCELLED, "1234"),
    ("CANCELLED+", State.CANCELLED, None),
    ("OUT_OF_MEMORY", State.OUT_OF_MEMORY, None),
    ("NODE_FAIL", State.NODE_FAIL, None),
    ("PREEMPTED", State.PREEMPTED, None),
    ("REQUEUED", State.REQUEUED, None),
    ("WEIRD_NEW_STATE", State.UNKNOWN, None),
    ("", State.UNKNOWN, None),
])
def test_state_column(raw: str, state: State, by: str | None) -> None:
    obs = only(line(State=raw))
    assert obs.state is state
    assert obs.slurm_state == raw
    assert obs.cancelled_by == by


def test_unknown_state_is_never_terminal() -> None:
    assert classify_state("WEIRD_NEW_STATE").info.terminal is False


@pytest.mark.parametrize("bad", [
    "7|7|t|batch|COMPLETED",  # too few fields
    "garbage",
    line(JobID="x7"),  # not a job id
    line(JobID="7_[3-9%2"),  # unterminated range
    "",
])
def test_malformed_line_is_skipped(bad: str) -> None:
    assert parse_sacct_line(bad) is None
    good = line(JobID="8", JobIDRaw="8")
    assert [r.job_id for r in parse_sacct(f"{bad}\n{good}\n")] == ["8"]


def test_comment_with_pipes_stays_intact() -> None:
    comment = 'campaign=c1 task=7 {"k":"a|b"} | tail'
    row = parse_sacct_line(line(Comment=comment))
    assert row is not None
    assert row.comment == comment
    assert row.state.state is State.COMPLETED and row.nodes == "node1"


@pytest.mark.parametrize(("text", "seconds"), [
    ("1-02:03:04", 93784),
    ("00:00:05", 5),
    ("12:34", 754),
    ("365-00:00:00", 365 * 86400),
])
def test_elapsed(text: str, seconds: int) -> None:
    assert only(line(Elapsed=text)).elapsed_s == seconds


@pytest.mark.parametrize(("text", "seconds"), [
    ("UNLIMITED", None), ("Partition_Limit", None), ("", None), ("2-00:00:00", 172800),
])
def test_timelimit(text: str, seconds: int | None) -> None:
    row = parse_sacct_line(line(Timelimit=text))
    assert row is not None and row.timelimit_s == seconds


@pytest.mark.parametrize(("job_id", "indices"), [
    ("7_[3-9%2]", (3, 4, 5, 6, 7, 8, 9)),
    ("7_[1,4-5]", (1, 4, 5)),
    ("7_[0-10:5]", (0, 5, 10)),
    ("7_[2]", (2,)),
])
def test_pending_array_range_expands(job_id: str, indices: tuple[int, ...]) -> None:
    observed = observe_jobs(line(JobID=job_id, State="PENDING", Start="Unknown",
                                 End="Unknown", NodeList="None assigned"))
    assert list(observed) == [("7", i) for i in indices]
    assert all(obs.state is State.PENDING and obs.nodes == "" for obs in observed.values())


def test_expand_index_range_directly() -> None:
    assert expand_index_range("3-9%2") == (3, 4, 5, 6, 7, 8, 9)
    assert expand_index_range("1,4-5") == (1, 4, 5)


def test_split_off_element_is_not_overwritten_by_the_pending_range() -> None:
    text = "\n".join([
        line(JobID="7_3", JobIDRaw="8", State="RUNNING", End="Unknown"),
        line(JobID="7_[3-5%2]", JobIDRaw="7", State="PENDING", Start="Unknown", End="Unknown"),
    ])
    observed = observe_jobs(text)
    assert observed[("7", 3)].state is State.RUNNING
    assert [observed[("7", i)].state for i in (4, 5)] == [State.PENDING, State.PENDING]


def test_step_lines_fold_into_their_allocation_and_time_unknown_is_none() -> None:
    text = "\n".join([
        line(JobID="7_1", JobIDRaw="9", State="RUNNING", End="Unknown"),
        line(JobID="7_1.batch", JobIDRaw="9.batch", State="RUNNING", MaxRSS="1024K", End="Unknown"),
        line(JobID="7_1.extern", JobIDRaw="9.extern", State="RUNNING", MaxRSS="2M", End="Unknown"),
    ])
    obs = observe_jobs(text)[("7", 1)]
    assert obs.state is State.RUNNING
    assert obs.end is None
    assert obs.step_states == ("batch:RUNNING", "extern:RUNNING")
    assert obs.max_rss == "2M"


def test_step_before_its_allocation_is_ignored() -> None:
    assert observe_jobs(line(JobID="7.batch", JobIDRaw="7.batch")) == {}


def test_cancelled_job_with_oom_step_becomes_out_of_memory() -> None:
    text = "\n".join([line(State="CANCELLED by 0"),
                      line(JobID="7.0", JobIDRaw="7.0", State="OUT_OF_MEMORY", ExitCode="0:125")])
    assert only(text).state is State.OUT_OF_MEMORY


def test_completed_job_with_oom_step_stays_completed() -> None:
    """Only a failed/cancelled job is reclassified; a step OOM the job survived is not fatal."""
    text = "\n".join([line(), line(JobID="7.0", JobIDRaw="7.0", State="OUT_OF_MEMORY", ExitCode="0:125")])
    assert only(text).state is State.COMPLETED


def test_requeued_twice_counts_two() -> None:
    text = "\n".join([line(State="REQUEUED"), line(State="REQUEUED"), line(State="RUNNING", End="Unknown")])
    obs = only(text)
    assert obs.state is State.RUNNING
    assert obs.requeues == 2


def test_only_wanted_elements_are_folded_when_a_tick_names_them() -> None:
    text = (FIXTURES / "array_completed.txt").read_text()
    every = observe_jobs(text)
    wanted = set(list(every)[:2])
    assert observe_jobs(text, wanted) == {k: every[k] for k in wanted}


def test_a_derived_exit_code_slurm_lost_is_taken_from_the_runner() -> None:
    # job 5537 on the lab (tests/fixtures/sacct_exit/derived_lost.txt): a program that SIGTERMed
    # itself; every line says 15:0 and DerivedExitCode stayed 0:0, so sacct alone reads exit 15.
    # The runner's exit.json said returncode -15.
    line = (FIXTURES.parent / "sacct_exit" / "derived_lost.txt").read_text().splitlines()[0].split("|")
    code, _ = shell_exit(line[2], line[3])
    assert code == 15
    assert runner_exit(code, -15) == 143  # killed by TERM, as the runner saw it
    assert runner_exit(code, 143) == 143  # the runner itself exited 143
    assert runner_exit(code, 15) == 15  # a program that really exited 15
    assert runner_exit(code, None) == 15  # no exit.json: sacct's word
    assert runner_exit(1, -1) == 129 and runner_exit(0, -15) == 0 and runner_exit(70, 198) == 70
