"""The current user's crontab, read with `crontab -l` and replaced with `crontab FILE`."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from campaignctl.adapters import proc
from campaignctl.core.base.errors import CampaignctlError

# `crontab -l` with nothing installed exits 1 and says so: "no crontab for alice" (cronie,
# Debian cron), "crontab: no crontab for alice" (FreeBSD).
_NO_CRONTAB = re.compile(r"no crontab for ")
_MISSING_HINT = ("install cron (Debian/Ubuntu: `apt-get install cron`, RHEL/Rocky: `dnf install cronie`) "
         "or ask your admin; on a cluster that allows it, use scrontab instead (README: Cron)")
_FAILED_HINT = ("your crontab was not changed; /etc/cron.allow and /etc/cron.deny can refuse a user "
                "(ask your admin), or use scrontab instead (README: Cron)")


class CrontabUnavailableError(CampaignctlError):
    """`crontab` is missing, refused this user, or rejected the file (EX_UNAVAILABLE)."""

    exit_code = 69
    kind = "crontab_unavailable"


def read_crontab() -> str:
    """The user's crontab text; '' when none is installed."""
    result = proc.run([_crontab(), "-l"], check=False, attempts=1, timeout=30)
    if result.returncode == 0:
        return result.stdout
    if result.returncode == 1 and _NO_CRONTAB.search(result.stderr):
        return ""
    raise _failed(result)


def write_crontab(text: str) -> None:
    """Replace the user's crontab with `text`, via a private (0600) temporary file."""
    fd, name = tempfile.mkstemp(prefix="campaignctl-crontab-", suffix=".txt")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        result = proc.run([_crontab(), name], check=False, attempts=1, timeout=30)
    finally:
        Path(name).unlink(missing_ok=True)
    if result.returncode != 0:
        raise _failed(result)


def _crontab() -> str:
    found = shutil.which("crontab")
    if found is None:
        raise CrontabUnavailableError("crontab: command not found", _MISSING_HINT)
    return found


def _failed(result: proc.ProcResult) -> CrontabUnavailableError:
    # e.g. "You (alice) are not allowed to use this program (crontab)" when cron.allow/deny
    # excludes the user, or "errors in crontab file, can't install."
    lines = result.stderr.strip().splitlines()
    detail = lines[-1] if lines else "(no stderr)"
    return CrontabUnavailableError(f"`{' '.join(result.argv)}` exited {result.returncode}: {detail}", _FAILED_HINT)
