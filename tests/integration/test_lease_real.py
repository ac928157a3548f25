"""Issue 15 as a team meets it, on the real cluster and the real PostgreSQL server: two cron ticks
(`reconcile --all`, each with the crontab line's environment and its own XDG_STATE_HOME, so their
flocks never meet) started at the same moment, round after round, over one campaign whose every
task fails once with a code the policy retries. Before the lease, one failure got two retries in
13 of 30 such rounds and ticks died with exit 1 on `decisions_pkey` and `telemetry`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.cron_path import CRON_PATH
from tests.integration.test_reconcile_real import HERE, history

pytestmark = pytest.mark.slurm

TASKS = 10
STAGGER_S = 5  # task i fails after i × 5 s: fresh failures to race on over ~50 s of rounds
PROGRAM = Path(sys.executable).parent / "campaignctl"  # what `cron install` writes on the line


def crontab_env(home: Path, state: Path, slurm_conf: str, db_url: str) -> dict[str, str]:
    """`env -i HOME=… PATH=/usr/bin:/bin SLURM_CONF=… CAMPAIGNCTL_DB_URL=… XDG_STATE_HOME=…`."""
    home.mkdir()
    return {"HOME": str(home), "PATH": CRON_PATH, "SLURM_CONF": slurm_conf, "CAMPAIGNCTL_DB_URL": db_url,
            "XDG_STATE_HOME": str(state)}


def both_at_once(envs: list[dict[str, str]]) -> list[tuple[int, str, str]]:
    ticks = [subprocess.Popen([str(PROGRAM), "reconcile", "--all", "--json"], env=env, cwd=env["HOME"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for env in envs]
    try:
        return [(tick.wait(timeout=120), *tick.communicate()) for tick in ticks]
    finally:
        for tick in ticks:
            if tick.poll() is None:
                tick.kill()


def answers(runs: list[tuple[int, str, str]]) -> list[dict[str, Any]]:
    """The `--json` data of every tick that exited 0."""
    return [json.loads(out)["data"] for code, out, _ in runs if code == 0]


def test_two_users_ticks_at_the_same_moment_retry_each_failure_exactly_once(
        slurm_conf: str, pg_url: str, tmp_path: Path) -> None:
    name = f"lease-{uuid.uuid4().hex[:6]}"
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    tasks = "\n".join(f"  - {{delay: {STAGGER_S * task}}}" for task in range(TASKS))
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, chaos.py, late_flaky, "{{delay}}"]
tasks:
{tasks}
resources: {{cpus_per_task: 1, mem: 100M, time: "00:05:00"}}
policy: {{use: default, rules: {{failed: {{backoff: 0}}}}}}
""", f"{name}.yaml"))
    envs = [crontab_env(tmp_path / f"home{n}", tmp_path / f"state{n}", slurm_conf, pg_url) for n in (1, 2)]
    rounds: list[list[tuple[int, str, str]]] = []
    deadline = time.monotonic() + 170
    while Store.open().campaign(name).state != "finished":  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            codes = Counter(code for pair in rounds for code, _, _ in pair)
            pytest.fail(f"{name} did not finish in {len(rounds)} rounds: exit codes {dict(codes)}, attempts "
                        f"by task {dict(Counter(row.task_index for row in history(name)))}")
        rounds.append(both_at_once(envs))

    runs = [run for pair in rounds for run in pair]
    codes = Counter(code for code, _, _ in runs)
    assert set(codes) <= {0, 75}, (codes, [err for code, _, err in runs if code not in (0, 75)][:3])
    assert not [err for _, _, err in runs if "Traceback" in err]
    refused = sum(1 for a in answers(runs) if any(c["name"] == name for c in a["left_alone"]))
    deciding = [pair for pair in rounds if any(d["action"] == "resubmit" for a in answers(pair)
                                               for c in a["campaigns"] for d in c["decisions"])]
    print(f"{len(rounds)} rounds ({len(deciding)} deciding a retry), exit codes {dict(codes)}, "
          f"the lease turned a tick away {refused} time(s)")
    assert refused > 0  # the ticks did meet: one of them was turned away by the lease

    store = Store.open()
    record = store.campaign(name)
    assert record is not None
    attempts = Counter(row.task_index for row in history(name))
    assert attempts == Counter({task: 2 for task in range(TASKS)})  # each failure retried once, not twice
    resubmits = Counter(e.task_index for e in DecisionLog(store.engine).entries(record.id) if e.action == "resubmit")
    assert resubmits == Counter({task: 1 for task in range(TASKS)})
    assert {row.state for row in history(name) if row.attempt_number == 2} == {"COMPLETED"}
    verify = subprocess.run([str(PROGRAM), "log", "verify"], env=envs[0], cwd=envs[0]["HOME"],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stderr
