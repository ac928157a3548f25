"""Submissions Slurm answers badly, on the real cluster: a retry no node can run (more memory
than the lab's RealMemory=4000), and an sbatch that creates its job, then reports a timeout."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import policy_decisions, write_spec
from tests.integration.test_reconcile_real import HERE, history, ticking_until_finished

pytestmark = pytest.mark.slurm
TIMED_OUT = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"


def oom_campaign(tmp_path: Path, name: str, mem_factor: int, extra: str = "") -> str:
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, chaos.py, oom, "300"]
resources: {{mem: 250M, time: "00:10:00"}}
policy: {{use: default, submit_tries: 2, submit_backoff: 2s,
          rules: {{out_of_memory: {{mem_factor: {mem_factor}}}}}}}
{extra}""", name=f"{name}.yaml"))
    return name


def tokens(name: str) -> set[str]:
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    return {s.token for s in store.submissions(record.id)}


def queued_with(token_set: set[str]) -> list[str]:
    out = proc.run(["squeue", "--me", "-r", "--noheader", "--format=%i|%j|%T|%r"]).stdout
    return [line for line in out.splitlines() if any(f".{t}." in line for t in token_set)]


def jobs_by_token(name: str) -> dict[str, set[str]]:
    """Every job sacct knows under each of the campaign's tokens (job name `cc.TOKEN.NAME`)."""
    out = proc.run(["sacct", "-X", "-n", "-P", "--format=JobIDRaw,JobName", "-S", "now-1hours",
                    f"--name={','.join(f'cc.{t}.{name}' for t in tokens(name))}"]).stdout
    found: dict[str, set[str]] = {}
    for line in out.splitlines():
        job_id, _, job_name = line.partition("|")
        found.setdefault(job_name.split(".")[1], set()).add(job_id)
    return found


def test_a_retry_asking_more_memory_than_any_node_has_is_retried_then_given_up_and_leaves_no_job(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    # 250M × 20 = 5000M, above every node's RealMemory=4000. Slurm 22.05 takes such a job with
    # --hold (exit 0) and, released, leaves it PENDING (BadConstraints) for ever: the retry
    # must be asked with --test-only, refused, tried again after the backoff, then given up.
    name = oom_campaign(tmp_path, "toobig", 20)
    ticking_until_finished(name, timeout_s=180)
    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    log = [(e.rule, e.action, e.status, e.error, e.reason)
           for e in policy_decisions(DecisionLog(store.engine).entries(record.id))]
    assert [e[:3] for e in log] == [("out_of_memory", "resubmit", "failed"),
                                    ("submit_refused", "give_up", "applied")]
    assert "Requested node configuration is not available" in log[0][3]
    assert "2 time(s)" in log[1][4] and "Requested node configuration is not available" in log[1][4]
    retry = store.submissions(record.id)[-1]
    assert (retry.state, retry.tries, retry.job_id) == ("abandoned", 2, None)
    assert queued_with(tokens(name)) == []  # no job of the campaign left queued, held or pending
    assert [r.state for r in history(name)] == ["OUT_OF_MEMORY", "ABANDONED"]


@pytest.fixture
def sbatch_times_out_after_creating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`sbatch` on PATH that runs the real one, then, for a submission (`--hold`), prints what
    sbatch prints when slurmctld's reply is lost and exits 1: the job exists, the caller was
    told it failed."""
    real = shutil.which("sbatch")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(f"""#!/bin/sh
{real} "$@" || exit $?
case " $* " in *" --hold "*) echo "{TIMED_OUT}" >&2; exit 1;; esac
""")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(real).parent}:/usr/bin:/bin")
    return wrapper


def test_an_sbatch_that_reports_a_timeout_after_creating_its_job_leaves_one_job_per_token(
        slurm_conf: str, state_home: Path, tmp_path: Path, sbatch_times_out_after_creating: Path) -> None:
    name = oom_campaign(tmp_path, "lostreply", 2)  # the OOM retry (500M) fits and completes
    ticking_until_finished(name, timeout_s=180)
    assert [r.state for r in history(name)] == ["OUT_OF_MEMORY", "COMPLETED"]
    found = jobs_by_token(name)
    assert set(found) == tokens(name) and all(len(ids) == 1 for ids in found.values()), found
    assert queued_with(tokens(name)) == []
    assert reconcile(name).status == "ok"
