"""RPC rate limiting on the real cluster (`SlurmctldParameters=rl_enable`, Slurm 23.02+; the 24.11
lab sets it: a bucket of 30 RPCs per user, refilled at 2 per second; root and SlurmUser are exempt,
so the tick runs as a real Unix user, from a cron-like environment). A tick that resubmits the
retries of 45 tasks (more than the bucket holds: one RPC per task would overflow it) stays within
the bucket (its RPCs counted by slurmctld itself, `sdiag`), and a
tick whose user has just emptied the bucket still does its work: Slurm's clients are told to back
off, sleep and retry by themselves (nothing reaches campaignctl but the wait)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from campaignctl.adapters import proc, slurm
from campaignctl.core.slurm.slurm_version import SlurmVersion
from tests.cron_path import CRON_PATH
from tests.integration.test_multiuser_real import ALICE, ROOT, _as, unix_users, user_python  # noqa: F401
from tests.integration.test_reconcile_real import wait_for

pytestmark = pytest.mark.slurm

TASKS = 45  # one RPC per task would be half again the bucket; 102 tasks took 4 min of CI for the same claim
BUCKET = 30  # rl_bucket_size's default, which the lab keeps (slurmctld.log: rate_limit_init)
PROGRAM = "import os, sys; sys.exit(75 if os.environ['CAMPAIGNCTL_ATTEMPT'] == '1' else 0)"


@pytest.fixture
def rate_limited(slurm_conf: str) -> None:
    found = slurm.version()
    if found is None or found < SlurmVersion(23, 2):
        pytest.skip(f"Slurm {found} has no RPC rate limiting (rl_enable is 23.02+): the 24.11 run tests it")
    assert "rl_enable" in proc.run(["scontrol", "show", "config"]).stdout


@pytest.fixture
def alice_dir(rate_limited: None, user_python: Path) -> Iterator[Path]:  # noqa: F811
    base = ROOT / f"rl-{uuid.uuid4().hex[:8]}"
    base.mkdir(mode=0o755)
    shutil.chown(base, ALICE, ALICE)
    yield base
    proc.run(["scancel", "-u", ALICE], check=False)
    shutil.rmtree(base, ignore_errors=True)


def rpcs(user: str) -> int:
    """The RPCs slurmctld counted for `user` since it started (`sdiag`, read as root: not hers)."""
    for line in proc.run(["sdiag"]).stdout.splitlines():
        match = re.match(rf"\s*{re.escape(user)}\s+\(\s*\d+\)\s+count:(\d+)", line)
        if match:
            return int(match[1])
    return 0


def backed_off(uid: int) -> int:
    """slurmctld's `RPC rate limit exceeded by uid N …, telling to back off` lines so far."""
    log = Path(os.environ["SLURM_CONF"]).parent.parent / "logs" / "slurmctld.log"
    return log.read_text(errors="replace").count(f"RPC rate limit exceeded by uid {uid} ")


def queued_of(user: str) -> int:
    return len(proc.run(["squeue", "-u", user, "-r", "-h", "-o", "%i"]).stdout.split())


def test_retries_of_dozens_of_tasks_stay_within_the_bucket_and_a_drained_bucket_only_waits(
        alice_dir: Path, user_python: Path, slurm_conf: str) -> None:  # noqa: F811
    uid = int(proc.run(["id", "-u", ALICE]).stdout)
    env = {"HOME": "/nonexistent", "LOGNAME": ALICE, "SHELL": "/bin/sh", "PATH": CRON_PATH, "SLURM_CONF": slurm_conf,
           "XDG_STATE_HOME": str(alice_dir / "state"), "COLUMNS": "200"}
    spec = alice_dir / "rl.yaml"
    spec.write_text(f"""\
name: rl
command: [python3, -c, "{PROGRAM}"]
matrix: {{i: [{", ".join(map(str, range(TASKS)))}]}}
resources: {{mem: 100M, time: "00:05:00"}}
telemetry: {{interval: 0}}
policy: {{use: default, rules: {{failed: {{backoff: 0}}}}}}
""")
    shutil.chown(spec, ALICE, ALICE)

    def cctl(*args: str) -> str:
        done = _as(ALICE, user_python, ["-m", "campaignctl", *args], env, alice_dir)
        assert done.returncode == 0, done.stderr
        return done.stdout

    cctl("submit", str(spec))
    wait_for("every first attempt to end", lambda: queued_of(ALICE) == 0, 600)
    time.sleep(BUCKET / 2)  # a full bucket again (2 per second)
    # sdiag counts a user's RPCs from her jobs too (each element's srun creates its step as her):
    # elements released mid-tick that start before it ends were counted as the tick's (34 of 30
    # once, under CI's load). With the default partition DOWN, the retries are queued and wait:
    # only the tick's own RPCs count.
    partition = next(p.rstrip("*") for p in proc.run(["sinfo", "-h", "-o", "%P"]).stdout.split() if p.endswith("*"))
    proc.run(["scontrol", "update", f"PartitionName={partition}", "State=DOWN"])
    try:
        before, warned = rpcs(ALICE), backed_off(uid)
        cctl("reconcile", "rl")  # sees every attempt FAILED 75 and resubmits them all: one array
        spent = rpcs(ALICE) - before
    finally:
        proc.run(["scontrol", "update", f"PartitionName={partition}", "State=UP"])
    assert 0 < spent <= BUCKET, f"the retry tick made {spent} RPCs"
    assert backed_off(uid) == warned
    # every task has its second attempt (from the store: a retry that exits 0 at once may have
    # left the queue before squeue is asked; 24.11 once showed 94 of 102 still queued)
    assert json.loads(cctl("status", "--json"))["data"]["campaigns"][0]["attempts"] == 2 * TASKS

    for _ in range(BUCKET // 3 + 2):  # empty her bucket: squeue is three RPCs
        _as(ALICE, user_python, ["-c", "import subprocess; subprocess.run(['squeue', '--me', '-h'])"], env, alice_dir)
    drained = backed_off(uid)
    assert drained > warned  # slurmctld told her clients to back off

    def summary() -> dict[str, object]:
        return json.loads(cctl("status", "rl", "--json"))["data"]["campaigns"][0]  # type: ignore[no-any-return]

    def finished() -> bool:
        cctl("reconcile", "rl")  # her clients sleep through the back-off: the tick still does its work
        return summary()["state"] == "finished"
    wait_for("the campaign to finish", finished, 600)
    assert summary()["counts"] == {"COMPLETED": TASKS}
    assert "give_up" not in summary()["decisions"]  # type: ignore[operator]
