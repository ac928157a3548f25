"""The Slurm boundary against hostile surroundings (issue 14): variables that Slurm's clients read
as options, a client that hangs with its stdout held open by a child, bytes that are not UTF-8,
lines nobody can read. Fake clients here are real executables on PATH (the subprocess path is
what is under test), or the fake Slurm at the executor for whole ticks."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from campaignctl.adapters import proc, slurm
from campaignctl.cli import app
from campaignctl.core.base.errors import SlurmTransientError
from campaignctl.services.reconcile import reconcile
from campaignctl.services.status import status
from campaignctl.services.submit import submit
from tests.adapters.test_reconcile_fake_slurm import campaign
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm
from tests.users import REAL_GROUP, as_user


@pytest.mark.parametrize("name", [
    "SBATCH_ARRAY_INX", "SBATCH_JOB_NAME", "SBATCH_PARTITION", "SBATCH_EXPORT", "SBATCH_HOLD_X",
    "SQUEUE_STATES", "SQUEUE_FORMAT", "SQUEUE_USERS", "SACCT_FORMAT", "SACCT_LOCAL", "SACCT_FEDERATION",
    "SINFO_FORMAT", "SCONTROL_FEDERATION", "SCANCEL_STATE", "SCANCEL_BATCH", "SLURM_CLUSTERS",
    "SLURM_EXIT_ERROR",
])
def test_every_input_option_variable_is_scrubbed(name: str) -> None:
    env = proc.slurm_env({name: "x", "SLURM_CONF": "/etc/slurm.conf", "HOME": "/root"})
    assert name not in env
    assert env["SLURM_CONF"] == "/etc/slurm.conf" and env["HOME"] == "/root"
    assert proc.scrubbed_names({name: "x", "PATH": "/bin"}) == [name]


def test_what_the_user_and_the_job_need_is_kept_and_formats_are_forced() -> None:
    kept = {"SLURM_CONF": "/c", "SRUN_CPUS_PER_TASK": "2", "SALLOC_PARTITION": "p", "SLURM_DEBUG_FLAGS": "x",
            "PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0"}
    env = proc.slurm_env({**kept, "SLURM_TIME_FORMAT": "relative", "SLURM_BITSTR_LEN": "64", "TZ": "Asia/Tokyo"})
    assert env == {**kept, "SLURM_TIME_FORMAT": "standard", "SLURM_BITSTR_LEN": "0", "TZ": "UTC"}


def fake_client(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_bytes(b"#!/bin/sh\n" + body.encode("latin-1"))
    path.chmod(0o755)


def gone(pid: int) -> bool:
    """Not running: no such process, or a zombie waiting for its reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


HUNG = ("echo started >> {pidfile}.calls\necho '7|7|t|batch|RUNNING|0:0|0:0|00:00:01||node1|||||||'\n"
        "sleep 300 &\necho $! > {pidfile}\nsleep 300\n")


@pytest.mark.parametrize("how", ["stream", "run"])
def test_a_hung_client_whose_child_holds_stdout_ends_at_the_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    pidfile = tmp_path / "child.pid"
    fake_client(tmp_path / "bin", "sacct", HUNG.format(pidfile=pidfile))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    started = time.monotonic()
    with pytest.raises(SlurmTransientError) as caught:
        if how == "stream":
            proc.stream(["sacct", "--jobs=7"], lambda lines: list(lines), timeout=2)
        else:
            proc.run(["sacct", "--jobs=7"], timeout=2)
    took = time.monotonic() - started
    assert took < 60, f"took {took:.1f} s"  # not the client's 300 s
    assert (tmp_path / "child.pid.calls").read_text() == "started\n"  # one attempt: a timeout is not retried
    assert caught.value.exit_code == 75
    assert "timed out after 2 s" in caught.value.message
    deadline = time.monotonic() + 60
    while not gone(int(pidfile.read_text())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(int(pidfile.read_text())), "the background child was killed with its group"


def test_latin1_job_name_in_squeue_is_skipped_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # what `sbatch -J $'\xe9t\xe9' --wrap 'sleep 60'` makes squeue print for that job
    fake_client(tmp_path / "bin", "squeue",
                "printf '41|RUNNING|\\351t\\351|41|None\\n42|PENDING|cc.abc.rc|42_1|JobHeldUser\\n'\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    mark = slurm.skipped_mark()
    jobs = slurm.own_queued_jobs()
    assert [(j.array_job_id, j.name, j.state, j.job_id, j.reason) for j in jobs] == [
        ("42", "cc.abc.rc", "PENDING", "42_1", "JobHeldUser")]
    assert [note.split(":")[:2] for note in slurm.skipped_since(mark)] == [["squeue", " non-UTF-8 bytes"]]


def test_latin1_bytes_in_sacct_output_are_skipped_and_counted(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    good = "7|7|t|batch|COMPLETED|0:0|0:0|00:00:01|00:05:00|node1|cpu=1|100M||||2026-11-24T00:00:00|0|"
    bad = good.replace("7|7|t|", "8|8|\\351t\\351|")
    fake_client(tmp_path / "bin", "sacct", f"printf '{bad}\\n{good}\\n'\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    mark = slurm.skipped_mark()
    observed = slurm.observe(["7", "8"], datetime(2026, 11, 24))
    assert list(observed) == [("7", None)]
    assert len(slurm.skipped_since(mark)) == 1


class GarbledSacct:
    """The fake Slurm, with lines appended to every sacct answer."""

    def __init__(self, fake: FakeSlurm, extra: str) -> None:
        self.fake, self.extra = fake, extra

    def __call__(self, argv: list[str], timeout: float, env: dict[str, str]) -> proc.ProcResult:
        result = self.fake(argv, timeout, env)
        if argv[0] == "sacct":
            return proc.ProcResult(result.argv, 0, result.stdout + self.extra, "")
        return result


EXTRA = ("99_[0-4,6-11,...,69-...%1]|99|other|batch|PENDING|0:0|0:0|00:00:00||None assigned||||||||\n"
         "98|98|other|batch|RUNNING|0:0|0:0|1-xx:00:00||node1||||||||\n")


def test_the_tick_and_status_count_and_show_skipped_lines(tmp_path: Path, fake_slurm: FakeSlurm,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    campaign(tmp_path, fake_slurm, 3)
    for i in range(3):  # still running: every tick observes them
        fake_slurm.set_state(min(fake_slurm.jobs, key=int), i, "RUNNING")
    monkeypatch.setattr(proc, "EXECUTOR", GarbledSacct(fake_slurm, EXTRA))
    result = reconcile("rc")
    assert result.status == "ok"
    assert result.skipped_lines == 2
    assert any("SLURM_BITSTR_LEN" in note for note in result.skipped)
    assert any("Elapsed" in note for note in result.skipped)
    assert status("rc").skipped_lines == 2
    runner = CliRunner()
    out = runner.invoke(app, ["reconcile", "rc", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["data"]["skipped_lines"] == 2
    text = runner.invoke(app, ["reconcile", "rc"])
    assert text.exit_code == 0 and "2 line(s) skipped" in text.output
    shown = runner.invoke(app, ["status", "rc"])
    assert shown.exit_code == 0 and "2 line(s) of Slurm output could not be read" in shown.output
    assert "99_[0-4,6-11,...,69-...%1]" in shown.output  # Slurm's text, not rich markup
    rows = status("rc").tasks
    assert [(r.state, r.exit_code) for r in rows] == [("RUNNING", None)] * 3  # no exit code while running


def test_another_users_jobs_absent_from_sacct_are_never_declared_lost(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `PrivateData=jobs` sacct prints nothing for another user's jobs and `squeue --me` never
    lists them: for alice's jobs of a campaign shared with bob (a shared store), bob's tick must
    not take their absence for a lost job. The jobs' own submitter still sees a vanished job go lost."""
    as_user(monkeypatch, "alice", REAL_GROUP)
    spec = write_spec(tmp_path, f"""\
name: alices
command: [python3, train.py, "{{i}}"]
matrix: {{i: [0, 1, 2]}}
share: {{group: {REAL_GROUP}}}
""", name="alices.yaml")
    submit(spec)
    campaign(tmp_path, fake_slurm, 3, name="mine")
    fake_slurm.vanished.update(fake_slurm.jobs)  # what bob's sacct and squeue show: nothing
    as_user(monkeypatch, "bob", REAL_GROUP)
    later = datetime.now() + timedelta(hours=1)
    assert reconcile("alices", now=later).campaigns[0].decisions == []
    assert reconcile("alices", now=later + timedelta(hours=1)).campaigns[0].decisions == []
    as_user(monkeypatch, "alice", REAL_GROUP)
    reconcile("mine", now=later)
    lost = reconcile("mine", now=later + timedelta(hours=1)).campaigns[0].decisions
    assert [(d.rule, d.action) for d in lost] == [("lost", "resubmit")] * 3
    reconcile("alices", now=later)
    lost = reconcile("alices", now=later + timedelta(hours=1)).campaigns[0].decisions
    assert [(d.rule, d.action) for d in lost] == [("lost", "resubmit")] * 3
