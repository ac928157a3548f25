"""`cron`: install, remove or show the crontab line that runs `campaignctl reconcile`."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from campaignctl.adapters import crontab, paths
from campaignctl.adapters.crontab import CrontabUnavailableError
from campaignctl.core.base.crontab import (
    CronJob,
    cron_environment,
    find_entry,
    install_entry,
    remove_entry,
    render_job_line,
)
from campaignctl.services.ticks import record_cron_interval

LOG_NAME = "reconcile.log"


@dataclass(frozen=True, slots=True)
class CronResult:
    action: str  # install | remove | show
    changed: bool  # the crontab changed (with dry_run: would change)
    dry_run: bool
    installed: bool  # a managed entry is in the crontab afterwards (or would be)
    entry: str | None  # the managed job line: installed, removed, or current
    log_path: str
    note: str = ""  # a dry run without crontab(1): why the line is only shown

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def install(every_minutes: int, campaign: str | None = None, dry_run: bool = False,
            textfile: Path | None = None) -> CronResult:
    log = reconcile_log_path()
    job = CronJob(every_minutes, campaignctl_program(), str(log), campaign, _environment(),
                  os.path.abspath(textfile) if textfile else None)
    line = render_job_line(job)  # validates before anything is read or created
    try:
        before = crontab.read_crontab()
    except CrontabUnavailableError as exc:
        if not dry_run:
            raise
        # the line is what a dry run is for: print it for a crontab elsewhere, or scrontab
        return CronResult("install", True, True, True, line, str(log), f"{exc.message}: {exc.hint}")
    after = install_entry(before, line)
    if not dry_run:
        paths.state_dir()  # cron's `>> log` needs the directory; created private (0700)
    if after != before and not dry_run:
        crontab.write_crontab(after)
    if not dry_run:  # status and metrics judge a stall against it
        record_cron_interval(every_minutes)
    return CronResult("install", after != before, dry_run, True, line, str(log))


def remove(dry_run: bool = False) -> CronResult:
    before = crontab.read_crontab()
    entry = find_entry(before)
    after = remove_entry(before)
    if after != before and not dry_run:
        crontab.write_crontab(after)
    if not dry_run:
        record_cron_interval(None)
    return CronResult("remove", after != before, dry_run, False, entry, str(reconcile_log_path()))


def show() -> CronResult:
    entry = find_entry(crontab.read_crontab())
    return CronResult("show", False, False, entry is not None, entry, str(reconcile_log_path()))


def campaignctl_program() -> tuple[str, ...]:
    """How cron should start this same campaignctl, as absolute argv words.

    Not resolved through symlinks: pipx's ~/.local/bin/campaignctl link survives upgrades, and
    a venv's bin/python must stay in the venv to find its packages.
    """
    argv0 = Path(sys.argv[0])
    if argv0.name == "campaignctl" and os.access(argv0, os.X_OK):
        return (str(argv0.absolute()),)
    beside = Path(sys.executable).parent / "campaignctl"  # `python -m campaignctl` in a venv
    if os.access(beside, os.X_OK):
        return (str(beside),)
    found = shutil.which("campaignctl")
    if found:
        return (str(Path(found).absolute()),)
    return (sys.executable, "-m", "campaignctl")


def _environment() -> tuple[tuple[str, str], ...]:
    env = dict(os.environ)
    # cron starts in $HOME: relative paths would move
    for name in ("SLURM_CONF", "XDG_STATE_HOME", "CAMPAIGNCTL_CHAIN_HEAD"):
        if env.get(name):
            env[name] = os.path.abspath(env[name])
    return cron_environment(env)


def reconcile_log_path() -> Path:
    """<state_dir>/reconcile.log, absolute (cron runs in $HOME); not created, so a dry run or
    `show` leaves no trace."""
    return Path(os.path.abspath(paths.state_path())) / LOG_NAME


@dataclass(frozen=True, slots=True)
class CronEntry:
    """Whether the crontab runs `campaignctl reconcile`: without it nothing retries, promotes or
    pauses on its own (status says so in its header)."""

    installed: bool
    problem: str = ""  # why it could not be read: `crontab` missing or refused


def cron_entry() -> CronEntry:
    try:
        return CronEntry(find_entry(crontab.read_crontab()) is not None)
    except crontab.CrontabUnavailableError as exc:
        return CronEntry(False, exc.message)


def missing_cron_note() -> list[str]:
    """For `submit`: a campaign nobody reconciles never retries a failed task, and says nothing."""
    entry = cron_entry()
    if entry.installed:
        return []
    why = f" ({entry.problem})" if entry.problem else ""
    return [f"no crontab line runs `campaignctl reconcile`{why}: failed tasks are retried, rungs promoted "
            "and budgets held only when a tick runs; `campaignctl cron install --every 5`"]
