"""Issue 26's duplicate jobs, on the real cluster: a tick frozen (SIGSTOP, as a suspended laptop
session or a hung NFS client freezes it) inside the sbatch of a retry, past its lease's TTL.
Another tick takes the lease and submits the retry; the frozen tick, woken, must neither record
nor release its own job for the token: before the lease was checked around sbatch, two released
jobs carried one token and the task ran twice."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.adapters.store import Store
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.cron_path import CRON_PATH
from tests.integration.test_reconcile_real import HERE, history, wait_for
from tests.integration.test_stranded_real import jobs_by_token

pytestmark = pytest.mark.slurm
PROGRAM = Path(sys.executable).parent / "campaignctl"
TTL_S = 30  # CAMPAIGNCTL_LEASE_TTL's least

# The real sbatch, except that the first submission (not a --test-only check) stops its caller
# and itself before it reaches slurmctld: the tick is frozen inside sbatch.
FREEZING_SBATCH = """#!/bin/sh
case " $* " in *" --test-only "*) exec {real} "$@";; esac
if mkdir {mark} 2>/dev/null; then
  echo $PPID > {mark}/tick
  kill -STOP $PPID $$
fi
exec {real} "$@"
"""


def cron_env(home: Path, state: Path, path: str, db_url: str, slurm_conf: str) -> dict[str, str]:
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "PATH": path, "SLURM_CONF": slurm_conf, "CAMPAIGNCTL_DB_URL": db_url,
            "XDG_STATE_HOME": str(state), "CAMPAIGNCTL_LEASE_TTL": str(TTL_S)}


def released_jobs(name: str) -> dict[str, list[str]]:
    """Token → its jobs sacct shows as ever run or still pending released (not CANCELLED)."""
    found: dict[str, list[str]] = {}
    for token, jobs in jobs_by_token(name).items():
        for job in jobs:
            state = proc.run(["sacct", "-X", "-n", "-P", "-j", job, "--format=State"]).stdout.split()
            if state and not state[0].startswith("CANCELLED"):
                found.setdefault(token, []).append(job)
    return found


def chaos_campaign(tmp_path: Path, prefix: str, mode: str, policy: str = "") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, chaos.py, {mode}]
resources: {{cpus_per_task: 1, mem: 100M, time: "00:05:00"}}
{policy}""", f"{name}.yaml"))
    return name


def freezing_env(tmp_path: Path, db_url: str, slurm_conf: str) -> dict[str, str]:
    """A cron-like environment whose sbatch freezes its caller at its first submission."""
    wrapper = tmp_path / "freezing-bin"
    wrapper.mkdir()
    (wrapper / "sbatch").write_text(FREEZING_SBATCH.format(real=shutil.which("sbatch"), mark=tmp_path / "froze"))
    (wrapper / "sbatch").chmod(0o755)
    return cron_env(tmp_path / "home-a", tmp_path / "state-a", f"{wrapper}:{CRON_PATH}", db_url, slurm_conf)


def test_a_tick_frozen_inside_sbatch_past_its_lease_leaves_one_job_per_token(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    name = chaos_campaign(tmp_path, "frozen", "flaky", "policy: {use: default, rules: {failed: {backoff: 0}}}\n")
    wait_for(f"{name}'s first attempt to fail", lambda: history(name)[-1].state == "FAILED"
             or _sacct_failed(history(name)[-1].job_id), 120)
    db_url = f"sqlite:///{Store.open().engine.url.database}"
    frozen_env = freezing_env(tmp_path, db_url, slurm_conf)
    other_env = cron_env(tmp_path / "home-b", tmp_path / "state-b", CRON_PATH, db_url, slurm_conf)

    frozen = subprocess.Popen([str(PROGRAM), "reconcile", name, "--json"], env=frozen_env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("tick A to freeze inside sbatch", lambda: (tmp_path / "froze" / "tick").exists(), 60)
        time.sleep(TTL_S + 2)  # past the lease's TTL: A's lease lapses (its renewing thread is frozen too)
        other = subprocess.run([str(PROGRAM), "reconcile", name, "--json"], env=other_env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
        assert other.returncode == 0, other.stderr
        retried = [d for c in json.loads(other.stdout)["data"]["campaigns"] for d in c["decisions"]]
        assert not retried  # B finished A's decision from its intent row (repair), deciding nothing new
        for pid in (int((tmp_path / "froze" / "tick").read_text()), *_children(frozen.pid)):
            os.kill(pid, signal.SIGCONT)
        code, out, err = frozen.wait(timeout=120), *frozen.communicate()
    finally:
        if frozen.poll() is None:
            frozen.kill()
    assert code == 0, err  # a lease lost mid-tick is the campaign left alone, not a failed tick
    left = json.loads(out)["data"]["left_alone"]
    assert [entry["name"] for entry in left] == [name] and "lost the lease inside sbatch" in left[0]["why"]
    wait_for(f"{name} to finish", lambda: _ticked_finished(name, other_env), 180)
    assert [row.attempt_number for row in history(name)] == [1, 2]
    jobs = released_jobs(name)
    assert all(len(ids) == 1 for ids in jobs.values()), jobs  # one job per token, the duplicate cancelled
    assert len(jobs) == 2  # the first attempt's and the one retry's


def test_a_retry_frozen_inside_sbatch_past_its_lease_leaves_one_job_per_token(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    """The same with a person's `retry`: it passes its lease to its Actor as a tick does. Before,
    the woken retry released its own job beside the one the tick submitted for the token."""
    name = chaos_campaign(tmp_path, "frozen-retry", "bug")
    db_url = f"sqlite:///{Store.open().engine.url.database}"
    other_env = cron_env(tmp_path / "home-b", tmp_path / "state-b", CRON_PATH, db_url, slurm_conf)
    wait_for(f"{name}'s bug to be given up", lambda: _ticked_given_up(name, other_env), 120)
    frozen_env = freezing_env(tmp_path, db_url, slurm_conf)

    frozen = subprocess.Popen([str(PROGRAM), "retry", name, "--task", "0", "--reason", "fixed"], env=frozen_env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the retry to freeze inside sbatch", lambda: (tmp_path / "froze" / "tick").exists(), 60)
        time.sleep(TTL_S + 2)
        other = subprocess.run([str(PROGRAM), "reconcile", name, "--json"], env=other_env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
        assert other.returncode == 0, other.stderr  # the tick finishes the retry's intent: its token's job
        for pid in (int((tmp_path / "froze" / "tick").read_text()), *_children(frozen.pid)):
            os.kill(pid, signal.SIGCONT)
        code, _, err = frozen.wait(timeout=120), *frozen.communicate()
    finally:
        if frozen.poll() is None:
            frozen.kill()
    assert code == 75 and "lost the lease inside sbatch" in err and "cancelled as a duplicate" in err, err
    wait_for(f"{name}'s retry to end", lambda: _ticked_given_up(name, other_env) and len(history(name)) == 2, 180)
    assert [row.attempt_number for row in history(name)] == [1, 2]
    jobs = released_jobs(name)
    assert all(len(ids) == 1 for ids in jobs.values()) and len(jobs) == 2, jobs


def _ticked_given_up(name: str, env: dict[str, str]) -> bool:
    subprocess.run([str(PROGRAM), "reconcile", name], env=env, capture_output=True, timeout=120)
    rows = history(name)
    return bool(rows) and rows[-1].state == "FAILED" and Store.open().campaign(name).state == "finished"  # type: ignore[union-attr]


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _sacct_failed(job_id: str | None) -> bool:
    if not job_id:
        return False
    out = proc.run(["sacct", "-X", "-n", "-P", "-j", job_id, "--format=State"]).stdout.split()
    return bool(out) and out[0] == "FAILED"


def _ticked_finished(name: str, env: dict[str, str]) -> bool:
    subprocess.run([str(PROGRAM), "reconcile", name], env=env, capture_output=True, timeout=120)
    record = Store.open().campaign(name)
    return record is not None and record.state == "finished"
