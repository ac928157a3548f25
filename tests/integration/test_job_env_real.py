"""The attempt's environment on the real cluster: a retry that `reconcile` submits from a cron-like
`env -i` shell runs in the submitter's environment; setup lines (through an exported bash
function, as Lmod's `module`) reach the program, a failing one is `setup_failed` with its output;
no secret leaks into campaignctl's output or a world-readable file; and an unmodified nanoGPT-style
script is ranked and promoted from its own output lines (`metrics.from_output`)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from campaignctl.adapters.decision_log import DecisionLog
from campaignctl.adapters.metrics_store import MetricsStore
from campaignctl.adapters.store import Store
from campaignctl.core.base.crontab import ENV_NAMES
from campaignctl.services.reconcile import reconcile
from campaignctl.services.report import report
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.cron_path import CRON_PATH
from tests.integration.test_real_cluster import cli, own_jobs_named
from tests.integration.test_reconcile_real import history, latest, ticking_until_finished, wait_for

pytestmark = pytest.mark.slurm
HERE = Path(__file__).parent
SECRET = "cc-secret-6f1d2e0b9a"
EXTRA_PATH = "/opt/cc-marker-entry/bin"
CAMPAIGNCTL = Path(sys.executable).parent / "campaignctl"  # the venv's entry point, as cron runs it

# attempt 1 runs out of memory; every attempt records what it saw (never the secret itself)
ENV_TASK = """\
import hashlib, json, os, sys
env = os.environ
seen = {"attempt": env["CAMPAIGNCTL_ATTEMPT"], "marker": env.get("CC_MARKER"), "path": env["PATH"].split(":"),
        "secret_present": hashlib.sha256(env.get("CC_SECRET", "").encode()).hexdigest() == sys.argv[1],
        "excluded": env.get("CC_EXCLUDED"), "slurm_job_id": env.get("SLURM_JOB_ID"), "shell": env.get("SHELL")}
open(os.path.join(env["CAMPAIGNCTL_ATTEMPT_DIR"], "seen.json"), "w").write(json.dumps(seen))
if env["CAMPAIGNCTL_ATTEMPT"] == "1":
    block = bytearray(400 * 2**20)
"""
# a stand-in for Lmod's `module` function, exported as Lmod exports it (BASH_FUNC_module%%)
FAKE_MODULE = ("() {  if [ \"$1 $2\" = \"load cuda/12.4\" ]; then export CUDA_HOME=/opt/cuda-12.4; "
               "export PATH=/opt/cuda-12.4/bin:$PATH; else echo 'Lmod has detected the following error:  "
               "The following module(s) are unknown: \"'$2'\"' >&2; return 1; fi\n}")


def cron_env(state_home: Path, slurm_conf: str) -> dict[str, str]:
    """What a crontab line gives `reconcile`: cron's own HOME, LOGNAME, PATH=/usr/bin:/bin and
    SHELL=/bin/sh, plus the variables `campaignctl cron install` puts on its line (core/base/crontab.py)."""
    env = {"HOME": os.environ.get("HOME", "/root"), "LOGNAME": os.environ.get("LOGNAME", "root"),
           "PATH": CRON_PATH, "SHELL": "/bin/sh"}
    on_line = {"SLURM_CONF": slurm_conf, "XDG_STATE_HOME": str(state_home)}
    if url := os.environ.get("CAMPAIGNCTL_DB_URL"):  # the test's PostgreSQL database (conftest)
        on_line["CAMPAIGNCTL_DB_URL"] = url
    assert set(on_line) <= set(ENV_NAMES)
    return {**env, **on_line}


def reconcile_from_cron(name: str, env: dict[str, str]) -> None:
    done = subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), str(CAMPAIGNCTL), "reconcile", name],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode in (0, 1), done.stderr  # 1: something needs attention (not an error)
    assert SECRET not in done.stdout + done.stderr


def seen(run_dir: Path, task: int = 0) -> dict[int, dict]:
    return {json.loads(p.read_text())["attempt"]: json.loads(p.read_text())
            for p in run_dir.glob(f"tasks/{task}/*/seen.json")}


def test_a_retry_submitted_from_cron_runs_in_the_submitters_environment(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "envtask.py").write_text(ENV_TASK)
    monkeypatch.setenv("CC_MARKER", "marker-from-the-submit-shell")
    monkeypatch.setenv("CC_SECRET", SECRET)
    monkeypatch.setenv("CC_EXCLUDED", "must-not-arrive")
    monkeypatch.setenv("PATH", f"{EXTRA_PATH}:{os.environ['PATH']}")
    submit(write_spec(tmp_path, f"""\
name: envretry
command: [{sys.executable}, envtask.py, {hashlib.sha256(SECRET.encode()).hexdigest()}]
resources: {{mem: 250M, time: "00:05:00"}}
env_capture: {{exclude: [CC_EXCLUDED]}}
telemetry: {{interval: 0}}
"""))
    cron = cron_env(state_home, slurm_conf)

    def retried_and_done() -> bool:
        reconcile_from_cron("envretry", cron)
        rows = latest("envretry")
        return rows[0].attempt_number == 2 and rows[0].state == "COMPLETED"
    wait_for("the OOM retry, submitted from the cron-like shell, to complete", retried_and_done, 240)

    first, retry = history("envretry")
    assert (first.state, retry.state) == ("OUT_OF_MEMORY", "COMPLETED")
    by_attempt = seen(tmp_path / "runs" / "envretry")
    for attempt in ("1", "2"):
        assert by_attempt[attempt]["marker"] == "marker-from-the-submit-shell"
        assert by_attempt[attempt]["path"][0] == EXTRA_PATH
        assert by_attempt[attempt]["secret_present"] is True
        assert by_attempt[attempt]["excluded"] is None  # excluded, and --export=ALL did not bring it back
        assert by_attempt[attempt]["shell"] == os.environ.get("SHELL")  # the submitter's, not cron's /bin/sh
    assert by_attempt["1"]["slurm_job_id"] != by_attempt["2"]["slurm_job_id"]  # the node's own, live

    # the secret is in no campaignctl output and only in private files
    for args in (["log", "envretry"], ["revisions", "envretry"], ["status", "envretry", "--json"],
                 ["log", "envretry", "--json"]):
        shown = cli(*args)
        assert shown.returncode == 0, shown.stderr
        assert SECRET not in shown.stdout + shown.stderr
    report("envretry", tmp_path / "report")  # the HTML report lands under tmp_path, scanned below
    holders = [p for base in (tmp_path, state_home) for p in base.rglob("*")
               if p.is_file() and SECRET.encode() in p.read_bytes()]
    private = tmp_path / "runs" / "envretry" / ".campaignctl-private"
    assert holders and all(p.parent == private for p in holders), holders  # the capture, nothing else
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in holders)


def test_setup_lines_reach_the_program_through_an_exported_module_function(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BASH_FUNC_module%%", FAKE_MODULE)
    spec = write_spec(tmp_path, f"""\
name: envsetup
command: [{sys.executable}, -c, "import os; print('CUDA_HOME', os.environ.get('CUDA_HOME'), 'FROM_SETUP',
  os.environ.get('FROM_SETUP'), 'PATH0', os.environ['PATH'].split(':')[0])"]
setup:
  - module load cuda/12.4
  - export FROM_SETUP=yes
resources: {{mem: 200M, time: "00:05:00"}}
telemetry: {{interval: 0}}
""")
    dry = cli("submit", str(spec), "--dry-run")
    assert "setup lines (bash, run in the job before the program on every attempt):" in dry.stdout
    assert "  1  module load cuda/12.4\n  2  export FROM_SETUP=yes\n" in dry.stdout
    submit(spec)
    ticking_until_finished("envsetup", timeout_s=180)
    assert latest("envsetup")[0].state == "COMPLETED"
    output = next((tmp_path / "runs" / "envsetup").glob("tasks/0/*/output.log")).read_text()
    assert "campaignctl setup [1/2]: module load cuda/12.4\ncampaignctl setup [2/2]: export FROM_SETUP=yes\n" in output
    assert "CUDA_HOME /opt/cuda-12.4 FROM_SETUP yes PATH0 /opt/cuda-12.4/bin" in output


def test_a_failing_setup_line_fails_the_attempt_as_setup_failed_and_the_program_never_runs(
        slurm_conf: str, state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BASH_FUNC_module%%", FAKE_MODULE)
    submit(write_spec(tmp_path, f"""\
name: envsetupfail
command: [{sys.executable}, -c, "open('ran', 'w').write('the program ran')"]
setup: [echo loading modules, module load nonexistent/1.0, echo never]
resources: {{mem: 200M, time: "00:05:00"}}
telemetry: {{interval: 0}}
"""))

    def ended() -> bool:
        reconcile("envsetupfail")
        return latest("envsetupfail")[0].state in ("FAILED", "COMPLETED", "CANCELLED", "OUT_OF_MEMORY", "TIMEOUT")
    wait_for("the attempt with the failing setup line to end", ended, 180)
    row = latest("envsetupfail")[0]
    assert (row.state, row.exit_code) == ("FAILED", 1)
    exit_info = json.loads(next((tmp_path / "runs" / "envsetupfail").glob("tasks/0/*/exit.json")).read_text())
    assert exit_info["returncode"] == 1 and exit_info["cause"] == "setup_failed"
    assert exit_info["evidence"] == ("setup line 2 `module load nonexistent/1.0` exited 1:\n"
                                     "Lmod has detected the following error:  The following module(s) are unknown: "
                                     "\"nonexistent/1.0\"")
    assert not (tmp_path / "ran").exists()


LR = (1e-4, 3e-4, 1e-3, 3e-3)
NANOGPT_EVAL = r"step (?P<step>\d+): train loss (?P<train_loss>[-\d.]+), val loss (?P<val_loss>[-\d.]+)"
NANOGPT_ITER = r"iter (?P<step>\d+): loss (?P<loss>[-\d.]+), time (?P<iter_ms>[\d.]+)ms, mfu (?P<mfu>[-\d.]+)%"


def test_an_unmodified_nanogpt_style_script_is_promoted_from_its_own_output_lines(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    wait_for("the queue to be free of earlier tests' jobs", lambda: not own_jobs_named(".cc."), 120)
    shutil.copy(HERE / "nanogpt_standin.py", tmp_path / "train.py")
    submit(write_spec(tmp_path, f"""\
name: nanogpt
command: [{sys.executable}, train.py, "--learning_rate={{lr}}", "--max_iters={{iters}}"]
matrix: {{lr: [{", ".join(map(str, LR))}]}}
resources: {{mem: 200M, time: "00:05:00"}}
telemetry: {{interval: 0}}
metrics:
  from_output:
    - '{NANOGPT_EVAL}'
    - '{NANOGPT_ITER}'
rungs:
  - {{name: screen, params: {{iters: 250}}, promote: {{metric: val_loss, goal: min, eta: 2}}}}
  - {{name: full, params: {{iters: 500}}}}
"""))
    ticking_until_finished("nanogpt", timeout_s=300)

    store = Store.open()
    record = store.campaign("nanogpt")
    assert record is not None
    promoted = DecisionLog(store.engine).entries(record.id, actions=("promote",))
    assert sorted(int(e.params["config"]) for e in promoted) == [2, 3]  # type: ignore[call-overload]
    val = MetricsStore(store.engine).rows(record.id, "val_loss")
    steps = {t: [r[2] for r in val if r[0] == t] for t in {r[0] for r in val}}
    assert steps == {0: [0, 250], 1: [0, 250], 2: [0, 250], 3: [0, 250], 6: [0, 250, 500], 7: [0, 250, 500]}
    iters = MetricsStore(store.engine).rows(record.id, "mfu")
    assert [r[4] for r in iters if r[0] == 0][:2] == [-100.0, -100.0]  # nanoGPT's "mfu -100.00%" before it settles
    print(json.dumps({"val_loss_at_250": {t: [r[4] for r in val if r[0] == t][-1] for t in range(4)}}))
