"""`campaignctl cron` as a user meets it, against a fake `crontab` first on PATH."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from campaignctl.core.base.crontab import MARKER, CronJob, render_job_line
from tests.cli.test_cli import assert_user_error
from tests.conftest import COMMAND_TIMEOUT_S, REPO
from tests.core.test_crontab import cron_rewrite

# Behaves like cronie's crontab for `-l` and `crontab FILE`; records each call and the mode of
# the file it was given.
FAKE_CRONTAB = """\
import os, shutil, stat, sys
store = os.environ["FAKE_CRONTAB"]
with open(store + ".calls", "a") as calls:
    calls.write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_CRONTAB_DENY"):
    sys.exit("You (tester) are not allowed to use this program (crontab)")
if sys.argv[1:] == ["-l"]:
    if not os.path.exists(store):
        sys.exit("no crontab for tester")
    sys.stdout.write(open(store).read())
    sys.exit(0)
with open(store + ".mode", "w") as mode:
    mode.write(oct(stat.S_IMODE(os.stat(sys.argv[1]).st_mode)))
shutil.copyfile(sys.argv[1], store)
"""
USER_LINES = "MAILTO=me@example.org\n# backups\n30 2 * * *\trsync -a ~/data /backup %nightly\\%\n"


class Cron:
    """A tmp_path world: fake crontab, state directory, and the CLI run in a subprocess."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        self.store = root / "spool" / "tester"
        self.store.parent.mkdir()
        self.state = root / "state"
        script = self.bin / "crontab"
        script.write_text(f"#!{sys.executable}\n{FAKE_CRONTAB}")
        script.chmod(0o755)

    def run(self, *args: str, path: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("CAMPAIGNCTL_DB_URL", "CAMPAIGNCTL_FAULT")}
        env.update(XDG_STATE_HOME=str(self.state), FAKE_CRONTAB=str(self.store), COLUMNS="200",
                   SLURM_CONF="/etc/slurm lab/slurm 100%.conf",
                   PATH=path if path is not None else f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}")
        env.update(extra)
        return subprocess.run([sys.executable, "-m", "campaignctl", "cron", *args], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=COMMAND_TIMEOUT_S)

    def crontab(self) -> str:
        return self.store.read_text() if self.store.exists() else ""

    def calls(self) -> list[str]:
        calls = self.store.with_name("tester.calls")
        return calls.read_text().splitlines() if calls.exists() else []


@pytest.fixture
def cron(tmp_path: Path) -> Cron:
    return Cron(tmp_path)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    return done.stdout


def job_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "reconcile" in line and not line.startswith("#")]


@pytest.mark.parametrize("command", ["install", "remove", "show"])
def test_every_cron_command_has_help_with_an_example(command: str, cron: Cron) -> None:
    assert "Example: campaignctl cron " + command in ok(cron.run(command, "--help"))


def test_install_twice_leaves_one_entry_and_keeps_the_users_lines(cron: Cron) -> None:
    cron.store.write_text(USER_LINES)
    ok(cron.run("install", "--every", "7"))
    assert "already installed, unchanged" in ok(cron.run("install", "--every", "7"))
    text = cron.crontab()
    assert text.startswith(USER_LINES) and text.count(MARKER) == 1
    [line] = job_lines(text)
    log = cron.state / "campaignctl" / "reconcile.log"
    assert line.startswith("*/7 * * * * SLURM_CONF='/etc/slurm lab/slurm 100\\%.conf' PATH=")
    assert line.endswith(f" reconcile --all >> {log} 2>&1")
    assert f"XDG_STATE_HOME={cron.state} " in line
    assert cron.store.with_name("tester.mode").read_text() == "0o600"  # the temp file was private
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700  # the log's directory exists, private


def test_install_with_a_new_interval_replaces_the_entry(cron: Cron) -> None:
    ok(cron.run("install"))
    ok(cron.run("install", "--every", "15", "--campaign", "lr-sweep"))
    [line] = job_lines(cron.crontab())
    assert line.startswith("*/15 * * * * ") and " reconcile lr-sweep >> " in line
    interval = cron.state / "campaignctl" / "cron-interval"  # status/metrics judge a stall by it
    assert interval.read_text() == "900\n"
    ok(cron.run("remove"))
    assert not interval.exists()


def test_show_prints_the_entry_and_json(cron: Cron) -> None:
    assert "not installed: campaignctl cron install" in ok(cron.run("show"))
    ok(cron.run("install"))
    [line] = job_lines(cron.crontab())
    assert line in ok(cron.run("show"))
    envelope = json.loads(ok(cron.run("show", "--json")))
    assert envelope["schema"] == "campaignctl/v1" and envelope["command"] == "cron show"
    assert envelope["data"]["installed"] is True and envelope["data"]["entry"] == line


def test_remove_deletes_only_the_entry(cron: Cron) -> None:
    cron.store.write_text(USER_LINES)
    ok(cron.run("install"))
    assert "removed:" in ok(cron.run("remove"))
    assert cron.crontab() == USER_LINES
    writes = len(cron.calls())
    assert "nothing to remove" in ok(cron.run("remove"))
    assert cron.calls()[writes:] == ["-l"]  # read, not rewritten


def test_dry_run_changes_nothing(cron: Cron) -> None:
    cron.store.write_text(USER_LINES)
    done = json.loads(ok(cron.run("install", "--dry-run", "--json")))["data"]
    assert done["changed"] is True and done["dry_run"] is True and "reconcile --all" in done["entry"]
    assert "would install" in ok(cron.run("install", "--dry-run"))
    assert cron.crontab() == USER_LINES and set(cron.calls()) == {"-l"}
    assert not cron.state.exists()  # no state directory either
    ok(cron.run("install"))
    assert "would remove" in ok(cron.run("remove", "--dry-run"))
    assert cron.crontab().count(MARKER) == 1


@pytest.mark.parametrize("every", ["0", "60"])
def test_every_out_of_range_is_exit_3_before_crontab_is_touched(every: str, cron: Cron) -> None:
    assert_user_error(cron.run("install", "--every", every), 3, f"--every must be 1 to 59 minutes, got {every}")
    assert cron.calls() == [] and not cron.state.exists()


def test_bad_campaign_name_is_exit_3(cron: Cron) -> None:
    assert_user_error(cron.run("install", "--campaign", "a;b"), 3, "is not a campaign name")


def test_missing_crontab_binary_names_the_package(cron: Cron, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    assert_user_error(cron.run("show", path=str(empty)), 69, "crontab: command not found", "apt-get install cron")


def test_a_dry_run_without_crontab_still_prints_the_line(cron: Cron, tmp_path: Path) -> None:
    """Issue 28: the line is what a dry run is for (to paste into a crontab elsewhere, or scrontab)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    shown = cron.run("install", "--dry-run", "--every", "7", path=str(empty))
    assert shown.returncode == 0, shown.stderr
    assert "would install:" in shown.stdout and "*/7 * * * * " in shown.stdout and "reconcile --all" in shown.stdout
    assert "crontab: command not found" in shown.stderr and "apt-get install cron" in shown.stderr
    assert_user_error(cron.run("install", "--every", "7", path=str(empty)), 69, "crontab: command not found")


def test_crontab_refusing_the_user_is_exit_69_with_its_message(cron: Cron) -> None:
    assert_user_error(cron.run("install", FAKE_CRONTAB_DENY="1"), 69, "not allowed to use this program")


def test_the_line_runs_under_sh_with_crons_percent_rewrite(tmp_path: Path) -> None:
    """The rendered command, rewritten as cron does, run by /bin/sh: the program sees each value
    intact and its output lands in the log."""
    program = tmp_path / "fake campaignctl"
    program.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                       "print(json.dumps([sys.argv[1:], os.environ['SLURM_CONF'], os.environ['PATH']]))\n")
    program.chmod(0o755)
    conf = "/etc/it's 100%\\%/slurm.conf"
    log = tmp_path / "state 50%" / "reconcile.log"
    log.parent.mkdir()
    prom = "/var/lib/node exporter/it's 100%.prom"
    job = CronJob(5, (str(program),), str(log), None, (("SLURM_CONF", conf), ("PATH", "/usr/bin:/bin")), prom)
    command = render_job_line(job).split(" ", 5)[5]
    assert cron_rewrite(command).endswith(" 2>&1")  # no unescaped % for cron to cut at
    subprocess.run(["/bin/sh", "-c", cron_rewrite(command)], check=True, env={}, timeout=COMMAND_TIMEOUT_S)
    assert json.loads(log.read_text()) == [["reconcile", "--all", "--textfile", prom], conf, "/usr/bin:/bin"]


def test_install_with_a_textfile_has_every_tick_rewrite_the_prometheus_export(cron: Cron, tmp_path: Path) -> None:
    prom_dir = tmp_path / "node exporter 100%"  # a space and a % in the path: quoted, escaped, still found
    prom_dir.mkdir()
    done = cron.run("install", "--textfile", str(prom_dir / "campaignctl.prom"))
    [line] = job_lines(cron.crontab())
    assert " reconcile --all --textfile " in line and line.endswith(" 2>&1"), ok(done)
    assert "already installed, unchanged" in ok(cron.run("install", "--textfile", str(prom_dir / "campaignctl.prom")))
    ok(cron.run("install", "--every", "10"))  # without it: the same one entry, replaced
    [line] = job_lines(cron.crontab())
    assert "--textfile" not in line and cron.crontab().count(MARKER) == 1
    assert cron.run("install", "--textfile", "out.txt").returncode == 2  # not *.prom: usage error


def test_a_relative_textfile_is_made_absolute_for_cron_which_starts_in_home(cron: Cron) -> None:
    ok(cron.run("install", "--textfile", "campaignctl.prom"))
    [line] = job_lines(cron.crontab())
    assert f" --textfile {REPO / 'campaignctl.prom'} >> " in line  # cron.run works in REPO
