"""submit against a fake Slurm at the process boundary: chunking, exactly-once, crash repair."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from campaignctl.adapters import faults
from campaignctl.adapters.store import Store
from campaignctl.core.base.errors import SlurmTransientError, SpecError
from campaignctl.services import submit as submit_service
from campaignctl.services.reconcile import reconcile
from campaignctl.services.results import results
from campaignctl.services.status import status
from tests.conftest import logged, run_main, write_spec
from tests.fakeslurm import FakeSlurm

# the first arrays are the first tick's start decisions: their intent rows are written with the decisions
CRASH_POINTS = ("after_decisions", "after_sbatch", "before_release", "before_outcome")


def grid_spec(tmp_path: Path, tasks: int, name: str = "big") -> Path:
    return write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, --seed, "{{seed}}"]
matrix: {{seed: [{", ".join(str(i) for i in range(tasks))}]}}
resources: {{gpus: 1, gpu_type: a100, cpus_per_task: 2, mem: 1G, time: "00:10:00", cpu_bind: cores}}
array: {{max_parallel: 4}}
""")


def test_2500_tasks_submit_in_ceil_n_over_max_array_size_sbatch_calls(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.max_array_size = 1000
    result = submit_service.submit(grid_spec(tmp_path, 2500))
    assert fake_slurm.submitted == math.ceil(2500 / 1000) == result.sbatch_calls
    assert [c.size for c in result.chunks] == [1000, 1000, 500]
    assert [c.array_spec for c in result.chunks] == ["0-999%4", "0-999%4", "0-499%4"]
    assert all(not job.held for job in fake_slurm.live_jobs())  # released after recording
    attempts = Store.open().attempts(Store.open().campaign("big").id)  # type: ignore[union-attr]
    assert sorted(a.task_index for a in attempts) == list(range(2500))
    assert len({a.token for a in attempts}) == 2500
    # each array is a start decision of the campaign's first tick, with its evidence and its job
    starts = logged("big", starts=True)
    assert [(e.rule, e.action, e.status, e.task_index) for e in starts] == [
        ("start", "start", "applied", 0), ("start", "start", "applied", 1000), ("start", "start", "applied", 2000)]
    assert [e.detail["job_id"] for e in starts] == [c.job_id for c in result.chunks]
    assert {e.group_token for e in starts} == {c.token for c in result.chunks}
    assert starts[0].inputs["max_array_size"] == 1000 and starts[0].inputs["spec_resources"]["gpus"] == 1


def test_resubmitting_the_same_spec_submits_nothing(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    spec = grid_spec(tmp_path, 5)
    submit_service.submit(spec)
    again = submit_service.submit(spec)
    assert again.outcome == "unchanged" and again.sbatch_calls == 0
    assert fake_slurm.submitted == 1


def test_a_changed_spec_with_the_same_tasks_records_a_revision_without_new_jobs(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit_service.submit(grid_spec(tmp_path, 3, name="rev"))
    text = grid_spec(tmp_path, 3, name="rev").read_text().replace("max_parallel: 4", "max_parallel: 2")
    changed = submit_service.submit(write_spec(tmp_path, text))
    assert (changed.outcome, changed.revision, fake_slurm.submitted) == ("revised", 2, 1)


def test_a_grid_grown_by_one_value_runs_exactly_the_new_task_even_when_finished(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    submit_service.submit(grid_spec(tmp_path, 3, name="grow"))
    store = Store.open()
    record = store.campaign("grow")
    assert record is not None
    store.set_campaign_state(record.id, "finished")
    grown = submit_service.submit(grid_spec(tmp_path, 4, name="grow"))
    assert (grown.outcome, grown.revision, fake_slurm.submitted) == ("revised", 2, 2)
    assert [(c.first_task, c.last_task, c.size) for c in grown.chunks] == [(3, 3, 1)]
    assert any("revision 2 adds task(s) 3" in n for n in grown.notes)
    assert sorted(a.task_index for a in store.attempts(record.id)) == [0, 1, 2, 3]
    assert store.campaign("grow").state == "active"  # type: ignore[union-attr]  # ticks follow the new task


SHAPE = """\
name: shape
command: [python3, train.py, --seed, "{seed}"]
matrix: {seed: [0, 1, 2]}
"""


@pytest.mark.parametrize(("changed", "said"), [
    (SHAPE.replace("[0, 1, 2]", "[0, 1]"), ["task 2: no longer in the spec"]),
    (SHAPE.replace("[0, 1, 2]", "[5, 1, 2, 7]"),
     ["task 0: seed=0 would become seed=5; its attempts, metrics and decisions so far would be read as the new "
      "config's", "task 3: added, runs now"]),
    (SHAPE.replace('"{seed}"', '"{depth}"').replace("matrix: {seed: [0, 1, 2]}", "tasks: [{depth: 2}, {depth: 4}]"),
     ["task 0: seed=0 would become depth=2", "task 2: no longer in the spec"]),
])
def test_a_spec_that_changes_which_tasks_exist_is_refused_unless_asked_and_says_what_happens(
        tmp_path: Path, fake_slurm: FakeSlurm, changed: str, said: list[str]) -> None:
    submit_service.submit(write_spec(tmp_path, SHAPE))
    with pytest.raises(SpecError) as refused:
        submit_service.submit(write_spec(tmp_path, changed))
    assert refused.value.exit_code == 3 and "another `name:`" in (refused.value.hint or "")
    assert all(any(line.startswith(s) for line in refused.value.problems) for s in said), refused.value.problems
    store = Store.open()
    assert store.campaign("shape").current_revision == 1 and fake_slurm.submitted == 1  # type: ignore[union-attr]
    forced = submit_service.submit(write_spec(tmp_path, changed), replace_tasks=True)
    assert forced.outcome == "revised" and forced.revision == 2
    assert status("shape").tasks and results("shape").configs  # nothing breaks on the revision


def test_tasks_dropped_with_replace_tasks_are_never_retried_and_the_campaign_finishes(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    first = submit_service.submit(write_spec(tmp_path, SHAPE))
    job = first.chunks[0].job_id or ""
    fake_slurm.set_state(job, 2, "TIMEOUT")  # the task about to be dropped ends as the policy retries
    submit_service.submit(write_spec(tmp_path, SHAPE.replace("[0, 1, 2]", "[0, 1]")), replace_tasks=True)
    fake_slurm.finish(job)
    fake_slurm.set_state(job, 2, "TIMEOUT")
    reconcile("shape")
    store = Store.open()
    record = store.campaign("shape")
    assert record is not None and record.state == "finished"
    assert fake_slurm.submitted == 1 and len(store.attempts(record.id)) == 3


class Crash(BaseException):
    pass


def crash_then_submit_again(spec: Path, point: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`submit` crashes at `point` of the protocol, then runs again to the end."""
    def crash_at(name: str) -> None:
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(faults, "crash_point", crash_at)
    with pytest.raises(Crash):
        submit_service.submit(spec)
    monkeypatch.setattr(faults, "crash_point", lambda _name: None)
    submit_service.submit(spec)


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_at_any_step_then_rerun_yields_no_duplicate_and_no_lost_task(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    fake_slurm.max_array_size = 4
    crash_then_submit_again(grid_spec(tmp_path, 10, name=f"crash-{point.replace('_', '-')}"), point, monkeypatch)

    live = fake_slurm.live_jobs()
    assert sum(j.size for j in live) == 10, "every task has exactly one job element"
    assert all(not j.held for j in live)
    result = status(f"crash-{point.replace('_', '-')}")
    assert [r.attempts for r in result.tasks] == [1] * 10
    assert {r.state for r in result.tasks} == {"COMPLETED"}


def test_status_makes_one_sacct_call_for_the_whole_campaign(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.max_array_size = 10
    submit_service.submit(grid_spec(tmp_path, 35, name="many"))
    before = fake_slurm.calls["sacct"]
    result = status("many")
    assert fake_slurm.calls["sacct"] - before == 1 == result.sacct_calls
    assert len(result.tasks) == 35 and result.campaigns[0].counts == {"COMPLETED": 35}
    sacct_argv = [a for a in fake_slurm.argvs if a[0] == "sacct"][-1]
    assert "--parsable2" in sacct_argv and any(a.startswith("--starttime=") for a in sacct_argv)
    assert any(a.startswith("--format=JobID,") for a in sacct_argv)


def test_transient_sbatch_errors_are_retried(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    fake_slurm.fail_next["sbatch --parsable"] = "sbatch: error: Socket timed out on send/recv operation"
    result = submit_service.submit(grid_spec(tmp_path, 2, name="retry"))
    assert result.sbatch_calls == 1 and fake_slurm.submitted == 2
    assert len(fake_slurm.live_jobs()) == 1


def test_persistent_transient_errors_end_with_exit_75_and_a_repairable_intent(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    def always_busy(argv, timeout, env):  # type: ignore[no-untyped-def]
        if argv[0] == "sbatch" and "--hold" in argv:
            fake_slurm.calls["sbatch --hold"] += 1
            from campaignctl.adapters.proc import ProcResult
            return ProcResult(tuple(argv), 1, "", "sbatch: error: Unable to contact slurm controller")
        return fake_slurm(argv, timeout, env)

    monkeypatch.setattr("campaignctl.adapters.proc.EXECUTOR", always_busy)
    spec = grid_spec(tmp_path, 2, name="busy")
    with pytest.raises(SlurmTransientError) as info:
        submit_service.submit(spec)
    assert info.value.exit_code == 75 and fake_slurm.calls["sbatch --hold"] == 4
    assert fake_slurm.calls["squeue"] == 3  # each rerun of sbatch after squeue found nothing
    monkeypatch.setattr("campaignctl.adapters.proc.EXECUTOR", fake_slurm)
    assert submit_service.submit(spec).chunks[0].action == "recovered"
    assert len(fake_slurm.live_jobs()) == 1


def test_submit_without_srun_on_path_is_exit_69_and_records_nothing(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26: submitit's bare RuntimeError ('Could not detect "srun"') was exit 1."""
    from tests.conftest import run_main
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    spec = write_spec(tmp_path, "name: nosrun\ncommand: [python3, t.py]\n")
    code, _, err = run_main(monkeypatch, capsys, "submit", str(spec))
    assert code == 69 and "srun is not on PATH" in err and "load your site's Slurm module" in err
    assert Store.open().campaign("nosrun") is None


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_packed_submission_crashed_anywhere_is_finished_once_with_its_packs(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """Ten tasks, four to a GPU: one array of three elements (4, 4, 2 tasks), each element's
    payload a pack. A crash at any step of the protocol, then `submit` again: the same three
    elements, once, their attempts sharing them as planned."""
    name = f"packed-{point.replace('_', '-')}"
    spec = write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, --seed, "{{seed}}"]
matrix: {{seed: [{", ".join(str(i) for i in range(10))}]}}
resources: {{gpus: 1, cpus_per_task: 1, mem: 500M, time: "00:10:00"}}
pack: {{per_gpu: 4, cpus: 2}}
""", name=f"{name}.yaml")
    dry = submit_service.submit(spec, dry_run=True)
    assert "#SBATCH --array=0-2\n" in dry.script and "#SBATCH --mem=2000M" in dry.script
    assert "#SBATCH --cpus-per-task=2\n" in dry.script and "#SBATCH --gres=gpu:1\n" in dry.script
    assert any("packed 4 per GPU, 4 tasks to a job, 2 CPUs to a job" in n for n in dry.notes)
    crash_then_submit_again(spec, point, monkeypatch)
    again = submit_service.submit(spec)  # nothing left to submit: nothing said of packing
    assert again.sbatch_calls == 0 and not any("packed" in n for n in again.notes)

    [job] = fake_slurm.live_jobs()
    assert job.size == 3 and not job.held
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    attempts = store.attempts(record.id)
    assert sorted((a.array_index, a.task_index) for a in attempts) == [
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 6), (1, 7), (2, 8), (2, 9)]
    assert {a.job_id for a in attempts} == {f"{job.job_id}_{i}" for i in range(3)}
    [sub] = store.submissions(record.id)
    assert sub.pack and sub.size == 10 and sub.array_spec == "0-2"


def test_submit_says_how_it_packed(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    spec = write_spec(tmp_path, """\
name: said
command: [python3, train.py, --seed, "{seed}"]
matrix: {seed: [0, 1, 2, 3, 4]}
resources: {gpus: 1, cpus_per_task: 1, mem: 500M, time: "00:10:00"}
pack: {per_gpu: 4, cpus: 2}
""", name="said.yaml")
    result = submit_service.submit(spec)
    assert result.sbatch_calls == 1
    said = "pack: all tasks: packed 4 per GPU, 4 tasks to a job, 2 CPUs to a job, as the spec's pack: says"
    assert said in result.notes


def test_a_pack_no_node_can_hold_is_refused_by_submit_and_named_by_the_dry_run(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    # 2-CPU nodes, as the lab's and many sites' are: 4 tasks × 1 CPU do not fit one job
    fake_slurm.sinfo_nodes = "node1|2|4000|gpu:a100:2|idle\nnode2|2|4000|gpu:a100:2|idle\n"
    spec = write_spec(tmp_path, """\
name: toobig
command: [python3, train.py, --seed, "{seed}"]
matrix: {seed: [0, 1, 2, 3]}
resources: {gpus: 1, cpus_per_task: 1, mem: 500M, time: "00:10:00"}
pack: {per_gpu: 4}
""", name="toobig.yaml")
    why = ("pack: each job of the pack (4 tasks) asks 4 CPUs (4 tasks × cpus_per_task 1) where the largest node "
           "has 2: set pack.cpus to at most 2")
    assert any(why in note for note in submit_service.submit(spec, dry_run=True).notes)
    with pytest.raises(SpecError) as refused:
        submit_service.submit(spec)
    assert why in str(refused.value) and "nothing was submitted or recorded" in str(refused.value.hint)
    assert Store.open().campaign("toobig") is None
    assert [a for a in fake_slurm.argvs if a[0] == "sbatch" and "--test-only" not in a] == []


def test_the_dry_run_shows_each_tasks_command_as_its_first_attempt_runs_it(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, """\
name: argv
command: [python3, train.py, --lr, "{lr}", --tag, "a b;c", "--init={resume?resume:scratch}"]
matrix: {lr: [0.1, 0.01]}
resources: {mem: 1G, time: "00:10:00"}
""", name="argv.yaml")
    result = submit_service.submit(spec, dry_run=True)
    assert result.argv == {0: ["python3", "train.py", "--lr", "0.1", "--tag", "a b;c", "--init=scratch"],
                           1: ["python3", "train.py", "--lr", "0.01", "--tag", "a b;c", "--init=scratch"]}
    code, out, _ = run_main(monkeypatch, capsys, "submit", str(spec), "--dry-run")
    assert code == 0 and "  1: python3 train.py --lr 0.01 --tag 'a b;c' --init=scratch\n" in out
    code, out, _ = run_main(monkeypatch, capsys, "submit", str(spec), "--dry-run", "--json")
    assert json.loads(out)["data"]["argv"]["0"][3] == "0.1"
