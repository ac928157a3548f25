"""`campaignctl metrics` as node_exporter's textfile collector meets it: the exposition read back and
checked against the store it came from, the file written whole with mode 0644 whatever the umask."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.store import Store
from campaignctl.cli import app
from campaignctl.core.usage.cost import campaign_spend
from campaignctl.services.campaigns import current_policy
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.cli.test_cli import assert_user_error, run_cli
from tests.conftest import COMMAND_TIMEOUT_S, REPO, write_spec
from tests.core.test_prometheus import parse_exposition
from tests.fakeslurm import FakeSlurm
from tests.report_campaign import NAME, drive


def metrics_cli(*args: str, state: Path, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env["XDG_STATE_HOME"] = str(state)
    return subprocess.run([sys.executable, "-m", "campaignctl", "metrics", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=COMMAND_TIMEOUT_S, preexec_fn=lambda: os.umask(umask))


def test_the_textfile_reads_back_as_the_store_has_it(tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    drive(tmp_path, fake_slurm, monkeypatch)
    prom = tmp_path / "textfile" / "campaignctl.prom"
    prom.parent.mkdir()
    done = metrics_cli("--textfile", str(prom), state=state_home, umask=0o077)
    assert done.returncode == 0, done.stderr
    assert f"written to {prom}" in done.stdout
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644  # node_exporter runs as its own user
    assert [p.name for p in prom.parent.iterdir()] == ["campaignctl.prom"]  # no temp file left behind
    families, samples = parse_exposition(prom.read_text())

    store = Store.open()
    record = store.campaign(NAME)
    assert record is not None
    policy, _ = current_policy(store, record)
    spend = campaign_spend(store.usage.groups(record.id), policy.prices)
    c = ("campaign", NAME)
    assert samples[("campaignctl_tasks", (c, ("state", "COMPLETED")))] == 3
    assert samples[("campaignctl_tasks", (c, ("state", "FAILED")))] == 1
    assert samples[("campaignctl_attempts_total", (c,))] == len(store.attempts(record.id)) == 5
    assert samples[("campaignctl_campaign_state", (c, ("state", "finished")))] == 1
    assert samples[("campaignctl_spend_gpu_hours", (c, ("kind", "spent")))] == pytest.approx(spend.spent.gpu_hours)
    assert samples[("campaignctl_budget_gpu_hours", (c,))] == 4
    assert samples[("campaignctl_budget_exhausted", (c,))] == 0
    logged = Counter((e.rule, e.action, e.mode) for e in DecisionLog(store.engine).entries(record.id))
    exported = {(dict(k[1])["rule"], dict(k[1])["action"], dict(k[1])["mode"]): v
                for k, v in samples.items() if k[0] == "campaignctl_decisions_total"}
    assert exported == logged and logged[("out_of_memory", "resubmit", "enforce")] == 1
    assert families["campaignctl_decisions_total"][0] == "counter"
    with store.engine.connect() as conn:
        finished = conn.exec_driver_sql("SELECT MAX(finished_at) FROM ticks").scalar_one()
    assert samples[("campaignctl_last_reconcile_timestamp_seconds", ())] == datetime.fromisoformat(finished).timestamp()

    printed = metrics_cli(NAME, state=state_home)  # stdout: the same exposition
    assert printed.returncode == 0 and printed.stdout == prom.read_text()


def test_running_tasks_export_their_recent_gpu_and_cpu_use(tmp_path: Path, fake_slurm: FakeSlurm,
                                                           state_home: Path) -> None:
    submit(write_spec(tmp_path, "name: live\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1]}\n"))
    [array] = [j.job_id for j in fake_slurm.live_jobs()]
    fake_slurm.set_state(array, 0, "RUNNING")
    fake_slurm.set_state(array, 1, "PENDING", nodes="None assigned")
    store = Store.open()
    record = store.campaign("live")
    assert record is not None
    token = store.attempts(record.id)[0].token
    folder = tmp_path / "runs" / "live" / "tasks" / "0" / token
    folder.mkdir(parents=True)
    now = time.time()
    use = [(100, 30), (150, 50), (200, 70)]  # (CPU % of one core, GPU %) every 10 s
    lines = [{"t": now - 20 + 10 * k, "cpu_pct": cpu, "rss_mb": 10, "nproc": 1,
              "gpus": [{"index": 0, "util_pct": gpu}]} for k, (cpu, gpu) in enumerate(use)]
    (folder / "telemetry.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    reconcile("live", now=datetime.now())
    done = metrics_cli("live", state=state_home)
    assert done.returncode == 0, done.stderr
    _, samples = parse_exposition(done.stdout)
    c = ("campaign", "live")
    assert samples[("campaignctl_task_gpu_util_pct", (c, ("task", "0")))] == 50
    assert samples[("campaignctl_task_cpu_pct", (c, ("task", "0")))] == 150
    assert not any(k[0].startswith("campaignctl_task_") and ("task", "1") in k[1] for k in samples)  # pending
    assert samples[("campaignctl_tasks", (c, ("state", "PENDING")))] == 1
    assert "campaignctl_budget_gpu_hours" not in done.stdout  # no budget set


def test_usage_errors(tmp_path: Path) -> None:
    done = run_cli("metrics", "--textfile", str(tmp_path / "out.txt"), state=tmp_path)
    assert done.returncode == 2 and "reads only files named *.prom" in done.stderr
    assert_user_error(run_cli("metrics", "nope", state=tmp_path), 4, "no campaign named 'nope'")
    assert_user_error(run_cli("metrics", "--textfile", str(tmp_path / "missing" / "x.prom"), state=tmp_path), 73,
                      "cannot write", "collector.textfile.directory")
    empty = run_cli("metrics", state=tmp_path)  # no campaign, no tick: nothing to say, and that is valid
    assert empty.returncode == 0 and empty.stdout == ""


def test_reconcile_with_a_textfile_ends_each_tick_by_rewriting_the_export(
        tmp_path: Path, fake_slurm: FakeSlurm, state_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    submit(write_spec(tmp_path, "name: tick\ncommand: [python3, t.py, '{i}']\nmatrix: {i: [0, 1]}\n"))
    [array] = [j.job_id for j in fake_slurm.live_jobs()]
    fake_slurm.set_state(array, 0, "RUNNING", nodes="node1")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    dry = runner.invoke(app, ["reconcile", "--all", "--dry-run", "--textfile", "out/c.prom"])
    (tmp_path / "out").mkdir()
    assert dry.exit_code == 0 and not (tmp_path / "out" / "c.prom").exists()  # a dry run writes nothing
    done = runner.invoke(app, ["reconcile", "--all", "--textfile", "out/c.prom"])
    assert done.exit_code == 0, done.output
    _, samples = parse_exposition((tmp_path / "out" / "c.prom").read_text())
    assert samples[("campaignctl_tasks", (("campaign", "tick"), ("state", "RUNNING")))] == 1
    fake_slurm.set_state(array, 0, "COMPLETED")
    fake_slurm.set_state(array, 1, "COMPLETED")
    assert runner.invoke(app, ["reconcile", "--all", "--textfile", "out/c.prom"]).exit_code == 0
    _, samples = parse_exposition((tmp_path / "out" / "c.prom").read_text())
    assert samples[("campaignctl_tasks", (("campaign", "tick"), ("state", "COMPLETED")))] == 2
    assert samples[("campaignctl_campaign_state", (("campaign", "tick"), ("state", "finished")))] == 1
    refused = runner.invoke(app, ["reconcile", "--all", "--textfile", "out/c.txt"])
    assert refused.exit_code == 2 and "*.prom" in refused.output
