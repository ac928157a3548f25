"""Submissions that Slurm answers badly, against a fake Slurm: an sbatch that created its job
and then reported a timeout, duplicates an older version left, a refused retry, output with no
job id, a release that fails. Each ends adopted (one job per token) or retried with backoff and
then given up with Slurm's message, never a task left SUBMITTING for ever nor a held job leaked.
(Real Slurm: tests/integration/test_stranded_real.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import submissions
from campaignctl.core.base.errors import SlurmTransientError, SlurmUnavailableError, SpecError
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.conftest import policy_decisions, write_spec
from tests.fakeslurm import FakeJob, FakeSlurm

TIMED_OUT = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
REFUSED = "Requested node configuration is not available"


def campaign(tmp_path: Path, tries: int = 3, backoff: str = "0", name: str = "st") -> Path:
    spec = write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, "{{i}}"]
matrix: {{i: [0, 1]}}
resources: {{mem: 1G, time: "00:10:00"}}
policy: {{use: default, submit_tries: {tries}, submit_backoff: "{backoff}"}}
""", name=f"{name}.yaml")
    submit(spec)
    return spec


def oom_first_task(fake: FakeSlurm) -> str:
    first = min(fake.jobs, key=int)
    fake.set_state(first, 0, "OUT_OF_MEMORY", "0:125")
    return first


def jobs_named(fake: FakeSlurm, token: str) -> list[FakeJob]:
    return [j for j in fake.jobs.values() if j.name.split(".")[1] == token]


def retry_token(name: str = "st") -> str:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return store.submissions(record.id)[-1].token


def entries(name: str = "st") -> list[tuple[str, str, str, str]]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    entries = policy_decisions(DecisionLog(store.engine).entries(record.id))
    return [(e.rule, e.action, e.status, e.error) for e in entries]


def test_submit_adopts_the_job_an_sbatch_created_before_reporting_a_timeout(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.fail_after_create.append(TIMED_OUT)
    result = submit(write_spec(tmp_path, """\
name: once
command: [python3, train.py, "{i}"]
matrix: {i: [0, 1]}
resources: {mem: 1G, time: "00:10:00"}
""", name="once.yaml"))
    assert fake_slurm.submitted == 1 and len(fake_slurm.jobs) == 1  # looked up by name, never run again
    [job] = fake_slurm.jobs.values()
    assert result.chunks[0].job_id == job.job_id and not job.held


def test_a_retry_whose_sbatch_reports_a_timeout_after_creating_the_job_is_adopted(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path)
    oom_first_task(fake_slurm)
    fake_slurm.fail_after_create.extend([TIMED_OUT] * 4)  # every sbatch would report it
    [decision] = reconcile("st").campaigns[0].decisions
    assert (decision.action, decision.status) == ("resubmit", "applied")
    [job] = jobs_named(fake_slurm, retry_token())
    assert decision.job_id == job.job_id and not job.held and fake_slurm.submitted == 2


def test_a_timeout_that_ends_the_tick_is_adopted_by_the_next_one_not_resubmitted(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path)
    oom_first_task(fake_slurm)
    fake_slurm.fail_after_create.append(TIMED_OUT)
    fake_slurm.fail_always["squeue"] = "squeue: error: Socket timed out on send/recv operation"
    with pytest.raises(SlurmTransientError):  # squeue cannot say whether the job exists: exit 75
        reconcile("st")
    assert fake_slurm.submitted == 2
    del fake_slurm.fail_always["squeue"]
    submitted = fake_slurm.submitted
    reconcile("st")
    [job] = jobs_named(fake_slurm, retry_token())
    assert fake_slurm.submitted == submitted and not job.held  # adopted and released, no second sbatch


def test_duplicates_an_older_version_left_are_cancelled_and_one_adopted(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path)
    oom_first_task(fake_slurm)
    fake_slurm.fail_always["sbatch --parsable"] = TIMED_OUT  # Slurm down for sbatch: the tick ends
    with pytest.raises(SlurmTransientError):
        reconcile("st")
    del fake_slurm.fail_always["sbatch --parsable"]
    token = retry_token()
    name = f"cc.{token}.st"
    for job_id in ("500", "501", "502"):  # what the old blind retry left: three held jobs, one token
        fake_slurm.jobs[job_id] = FakeJob(job_id, name, 1)
    fake_slurm.jobs["503"] = FakeJob("503", "cc.other.st", 1)  # not ours to touch
    reconcile("st")
    assert [(j.job_id, j.held, j.cancelled) for j in jobs_named(fake_slurm, token)] == [
        ("500", False, False), ("501", True, True), ("502", True, True)]
    assert not fake_slurm.jobs["503"].cancelled
    assert sorted(a for a in fake_slurm.argvs if a[0] == "scancel") == [("scancel", "501"), ("scancel", "502")]


def test_a_refused_retry_is_retried_with_backoff_then_given_up_with_slurms_message(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, tries=3, backoff="10m")
    oom_first_task(fake_slurm)
    fake_slurm.fail_always["sbatch --test-only"] = f"allocation failure: {REFUSED}"
    [first] = reconcile("st").campaigns[0].decisions
    assert (first.action, first.status) == ("resubmit", "retrying")
    store = Store.open()
    token = retry_token()
    assert store.submission(token).tries == 1 and REFUSED in store.submission(token).last_error
    [note] = status("st").campaigns[0].refused  # what a person sees meanwhile
    assert f"submission {token} (1 task(s)) refused 1 of 3 times, next try 20" in note and REFUSED in note
    asked = len(fake_slurm.argvs)
    assert reconcile("st").campaigns[0].state == "active"  # not due yet: Slurm is not asked again
    assert not [a for a in fake_slurm.argvs[asked:] if a[0] == "sbatch"]
    for tries in (2, 3):
        with store.engine.begin() as conn:  # the backoff has passed
            conn.execute(submissions.update().where(submissions.c.token == token)
                         .values(next_try_at="2000-01-01T00:00:00+00:00"))
        tick = reconcile("st").campaigns[0]
        assert store.submission(token).tries == tries
    assert tick.state == "finished" and store.submission(token).state == "abandoned"
    log = entries()
    assert log[0][:3] == ("out_of_memory", "resubmit", "failed") and REFUSED in log[0][3]
    assert [e[:3] for e in log[1:]] == [("submit_refused", "give_up", "applied")]
    reason = policy_decisions(DecisionLog(store.engine).entries(store.campaign("st").id))[1].reason  # type: ignore[union-attr]
    assert "3 time(s)" in reason and REFUSED in reason
    assert fake_slurm.submitted == 1  # only the first submit ever reached sbatch --hold
    assert fake_slurm.calls["sbatch"] == 1 + 1 + 3  # first submit (test-only + hold), 3 refused tries


def test_sbatch_output_without_a_job_id_is_looked_up_by_name(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path)
    oom_first_task(fake_slurm)
    fake_slurm.sbatch_stdout = "sbatch: Submitted batch job\n"  # rc 0, no id
    [decision] = reconcile("st").campaigns[0].decisions
    [job] = jobs_named(fake_slurm, retry_token())
    assert (decision.status, decision.job_id, job.held) == ("applied", job.job_id, False)


def test_unreadable_output_with_no_job_behind_it_is_retried_then_given_up(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, tries=2)
    oom_first_task(fake_slurm)
    real_sbatch = fake_slurm._sbatch

    def vanishing(args: list[str]) -> str:  # prints garbage and creates nothing
        return "" if args[0] == "--test-only" else "garbage\n"

    fake_slurm._sbatch = vanishing  # type: ignore[method-assign]
    assert reconcile("st").campaigns[0].decisions[0].status == "retrying"
    tick = reconcile("st").campaigns[0]
    fake_slurm._sbatch = real_sbatch  # type: ignore[method-assign]
    assert tick.state == "finished"
    assert [e[:2] for e in entries()] == [("out_of_memory", "resubmit"), ("submit_refused", "give_up")]
    assert "expected a job id" in entries()[0][3]


def test_a_release_that_keeps_failing_is_retried_then_the_held_job_cancelled_and_given_up(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path, tries=2)
    oom_first_task(fake_slurm)
    denied = "Access/permission denied for job 101\nslurm_suspend error: Access/permission denied"
    fake_slurm.fail_always["scontrol release"] = denied
    assert reconcile("st").campaigns[0].decisions[0].status == "retrying"
    [held] = jobs_named(fake_slurm, retry_token())
    assert held.held and not held.cancelled
    tick = reconcile("st").campaigns[0]
    assert held.cancelled and fake_slurm.submitted == 2  # the second try released the same job, not a new one
    assert tick.state == "finished"
    assert "Access/permission denied" in entries()[0][3]


def test_a_release_that_fails_once_succeeds_on_the_next_tick(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path)
    oom_first_task(fake_slurm)
    fake_slurm.fail_next["scontrol release"] = "slurm_suspend error: Access/permission denied"
    assert reconcile("st").campaigns[0].decisions[0].status == "retrying"
    reconcile("st")
    [job] = jobs_named(fake_slurm, retry_token())
    assert not job.held and fake_slurm.submitted == 2
    assert [e[:3] for e in entries()] == [("out_of_memory", "resubmit", "applied")]


def test_a_first_submission_slurm_refuses_leaves_nothing_and_the_fixed_spec_just_works(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.fail_next["sbatch --test-only"] = "allocation failure: Invalid partition name specified"
    text = """\
name: big
command: [python3, train.py, "{i}"]
matrix: {i: [0, 1]}
resources: {mem: 1G, time: "00:10:00", partition: PART}
"""
    with pytest.raises(SpecError, match="Invalid partition name specified") as refused:
        submit(write_spec(tmp_path, text.replace("PART", "gpux"), name="big.yaml"))
    assert refused.value.problems == ["resources (tasks 0-1): Slurm would refuse its tasks: "
                                      "Invalid partition name specified"]
    assert Store.open().campaign("big") is None and fake_slurm.submitted == 0
    result = submit(write_spec(tmp_path, text.replace("PART", "batch"), name="big.yaml"))
    assert (result.outcome, result.revision, fake_slurm.submitted) == ("created", 1, 1)


def test_a_duplicate_that_appears_after_release_is_cancelled_when_squeue_is_next_read(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path)
    [first] = fake_slurm.jobs.values()
    # an sbatch whose reply was lost and whose job reached slurmctld only after the lookup
    fake_slurm.jobs["150"] = FakeJob("150", first.name, 2)
    fake_slurm.jobs["151"] = FakeJob("151", "cc.unrelated.st", 1)  # not a token of this campaign
    fake_slurm.vanished.add(first.job_id)  # missing from sacct: the tick reads squeue
    reconcile("st")
    assert fake_slurm.jobs["150"].cancelled and not fake_slurm.jobs["151"].cancelled
    assert not first.cancelled
    assert [a for a in fake_slurm.argvs if a[0] == "scancel"] == [("scancel", "150")]


def test_a_retry_an_older_version_abandoned_unanswered_is_given_up_by_the_next_tick(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    campaign(tmp_path)
    oom_first_task(fake_slurm)
    fake_slurm.fail_next["sbatch --test-only"] = f"allocation failure: {REFUSED}"
    assert reconcile("st").campaigns[0].decisions[0].status == "retrying"
    store = Store.open()
    record = store.campaign("st")
    assert record is not None
    log = DecisionLog(store.engine)
    [resubmit] = policy_decisions(log.entries(record.id))
    # what the older version left: the submission abandoned, the decision failed, no give-up
    store.set_submission_state(retry_token(), "abandoned")
    log.write_outcomes([resubmit.id], "failed", {}, f"Slurm refuses the job: {REFUSED}")
    tick = reconcile("st").campaigns[0]
    assert tick.state == "finished" and tick.repaired == 1
    assert [e[:3] for e in entries()] == [("out_of_memory", "resubmit", "failed"),
                                          ("submit_refused", "give_up", "applied")]
    assert reconcile("st").campaigns[0].repaired == 0  # answered once


def test_releasing_a_job_that_already_ended_is_no_refusal(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    # scontrol release on a job cancelled while held (or run and ended), Slurm 22.05 on the lab
    # cluster, exit 1: what became of the job is sacct's to say, not a reason to try again
    campaign(tmp_path)
    oom_first_task(fake_slurm)
    fake_slurm.fail_next["scontrol release"] = ("Job has already finished for job 101\n"
                                                "slurm_suspend error: Job has already finished")
    [decision] = reconcile("st").campaigns[0].decisions
    assert decision.status == "applied" and Store.open().submission(retry_token()).tries == 0


def test_a_new_revision_applies_to_a_retry_that_has_not_reached_slurm(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    spec = campaign(tmp_path, tries=3, backoff="10m")
    oom_first_task(fake_slurm)
    fake_slurm.fail_next["sbatch --test-only"] = f"allocation failure: {REFUSED}"
    assert reconcile("st").campaigns[0].decisions[0].status == "retrying"
    token = retry_token()
    store = Store.open()
    assert (store.submission(token).revision, store.submission(token).tries) == (1, 1)
    # the user fixes the spec: revision 2, a new argument; the refused retry goes out under it at
    # once (its revision-1 backoff forgotten), keeping the memory the OOM rule gave it
    spec.write_text(spec.read_text().replace('"{i}"]', '"{i}", --fixed]'))
    assert submit(spec).outcome == "revised"
    reconcile("st")
    sub = store.submission(token)
    assert (sub.revision, sub.state, sub.tries) == (2, "released", 0)
    assert json.loads(sub.resources_json)["mem_mb"] == 1536
    assert len(jobs_named(fake_slurm, token)) == 1
    script = next(Path(a[-1]) for a in fake_slurm.argvs if a[0] == "sbatch" and "--hold" in a and token in a[-1])
    assert "revision=2" in script.read_text()


def test_a_campaign_whose_first_submission_was_given_up_shows_abandoned_and_the_same_submit_runs_it(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    # --test-only says yes, sbatch itself says no (an association added later fixes it)
    fake_slurm.fail_always["sbatch --parsable"] = ("sbatch: error: Batch job submission failed: "
                                                   "Invalid account or account/partition combination specified")
    spec = write_spec(tmp_path, """\
name: st
command: [python3, train.py, "{i}"]
matrix: {i: [0, 1]}
resources: {mem: 1G, time: "00:10:00"}
policy: {use: default, submit_tries: 2, submit_backoff: "0"}
""", name="st.yaml")
    with pytest.raises(SlurmUnavailableError, match="Invalid account"):
        submit(spec)
    assert reconcile("st").campaigns[0].state == "finished"
    finished = status("st")
    assert [t.state for t in finished.tasks] == ["ABANDONED", "ABANDONED"]  # never SUBMITTING once finished
    del fake_slurm.fail_always["sbatch --parsable"]
    again = submit(spec)
    assert again.outcome == "unchanged" and again.sbatch_calls == 1
    assert any("submitted again" in n for n in again.notes)
    [job] = [j for j in fake_slurm.jobs.values()]
    fake_slurm.finish(job.job_id)
    assert reconcile().campaigns[0].state == "finished"  # `--all` ticks it again: it is active
    assert [t.state for t in status("st").tasks] == ["COMPLETED", "COMPLETED"]
