"""The one crontab entry campaignctl manages: render it, find it, merge it into or remove it from
the user's crontab text. Every other line of the crontab is kept byte for byte.

cron hands the command (everything after the five time fields) to `/bin/sh -c`, after one
rewrite of its own (crontab(5): "Percent-signs (%) in the command, unless escaped with
backslash (\\), will be changed into newline characters"). cronie and Debian cron strip the
backslash only before `%` (do_command.c: `if (escaped) { if (ch == '%') *--p = ch; ...}`);
FreeBSD cron also turns `\\\\` into `\\`. So values are shell-quoted with `shlex.quote`, every `%`
becomes `\\%`, and a backslash from a value is never left next to `\\` or `%`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from campaignctl.core.base.errors import CampaignctlError
from campaignctl.core.base.safety import CAMPAIGN_NAME, has_control_chars

MARKER = "# campaignctl: managed reconcile entry (campaignctl cron remove to delete)"
# Passed on the job line itself (`NAME=value command`), not as crontab `NAME=value` lines,
# which would change the environment of the user's other entries too.
ENV_NAMES = ("SLURM_CONF", "PATH", "XDG_STATE_HOME", "CAMPAIGNCTL_DB_URL", "CAMPAIGNCTL_CHAIN_HEAD",
             "CAMPAIGNCTL_STALL_AFTER", "CAMPAIGNCTL_LEASE_TTL")
# Vixie-derived crons (Debian/Ubuntu `cron`, FreeBSD) read the command with
# get_string(cmd, MAX_COMMAND, …) and MAX_COMMAND is 1000: longer commands are cut silently.
MAX_COMMAND_BYTES = 999
_JOB_SHAPE = re.compile(r"^\*/\d{1,2} \* \* \* \* .* reconcile (--all|\S+)( --textfile .+)? >> .+ 2>&1$")


class CronError(CampaignctlError):
    """A cron entry cannot be rendered from these inputs (exit 3, like any invalid input)."""

    exit_code = 3
    kind = "cron"


@dataclass(frozen=True, slots=True)
class CronJob:
    """What the managed entry runs: `program reconcile --all|NAME [--textfile PATH]`, every N minutes."""

    every_minutes: int
    program: tuple[str, ...]
    log_path: str
    campaign: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    textfile: str | None = None  # the Prometheus textfile each tick rewrites


def cron_environment(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables a cron shell lacks, from the caller's environment (empty means unset)."""
    picked = {name: environ.get(name, "") for name in ENV_NAMES}
    picked["PATH"] = dedupe_path(picked["PATH"])
    return tuple((name, value) for name, value in picked.items() if value)


def dedupe_path(path: str) -> str:
    """PATH without repeated directories; lookups find the same files (the first one wins)."""
    return ":".join(dict.fromkeys(path.split(":"))) if path else ""


def render_job_line(job: CronJob) -> str:
    """The crontab line: `*/N * * * * NAME=value … program reconcile --all >> log 2>&1`."""
    _check_job(job)
    target = ["--all"] if job.campaign is None else [job.campaign]
    if job.textfile:
        target += ["--textfile", job.textfile]
    words = [f"{name}={cron_word(value)}" for name, value in job.env]
    words += [cron_word(w) for w in (*job.program, "reconcile", *target)]
    command = " ".join([*words, ">>", cron_word(job.log_path), "2>&1"])
    _check_length(command)
    return f"*/{job.every_minutes} * * * * {command}"


def render_entry(job: CronJob) -> str:
    return f"{MARKER}\n{render_job_line(job)}\n"


def cron_word(value: str) -> str:
    """`value` as one /bin/sh word that survives cron's `%` rewrite (see the module docstring).

    shlex.quote puts any value holding `\\` inside single quotes; closing and reopening the quote
    right after each backslash (`\\''`) keeps it away from a following `\\` or `%`.
    """
    return shlex.quote(value).replace("\\", "\\''").replace("%", "\\%")


def _check_job(job: CronJob) -> None:
    if not 1 <= job.every_minutes <= 59:
        raise CronError(f"--every must be 1 to 59 minutes, got {job.every_minutes}",
                        "cron's minute field is 0-59: for a longer period edit the line with `crontab -e`")
    if job.campaign is not None and not CAMPAIGN_NAME.match(job.campaign):
        raise CronError(f"--campaign {job.campaign!r} is not a campaign name",
                        "use the name from the spec: see `campaignctl status`")
    named = [*job.env, *(("program", p) for p in job.program), ("log path", job.log_path),
             ("--textfile", job.textfile or "")]
    for name, value in named:
        if has_control_chars(value):
            raise CronError(f"{name} contains a newline, carriage return or NUL: {value!r}",
                            "a crontab line cannot hold it; fix or unset the value and run it again")


def _check_length(command: str) -> None:
    size = len(command.encode())
    if size > MAX_COMMAND_BYTES:
        raise CronError(f"the cron command would be {size} bytes; cron (Debian, Ubuntu, BSD) cuts it at "
                        f"{MAX_COMMAND_BYTES}",
                        "run it with a shorter PATH, e.g. PATH=/usr/bin:/bin:$(dirname \"$(command -v sbatch)\") "
                        "campaignctl cron install")


def find_entry(text: str) -> str | None:
    """The managed job line in crontab `text`, or None."""
    lines = _split(text)
    for i in _marker_indexes(lines):
        if _is_managed_job(lines, i + 1):
            return lines[i + 1]
    return None


def install_entry(text: str, job_line: str) -> str:
    """`text` with exactly one managed entry, `job_line`: where the first one was, else appended."""
    lines = _split(text)
    drop = _entry_indexes(lines)
    at = min(drop, default=len(lines))
    kept = [(i, line) for i, line in enumerate(lines) if i not in drop]
    head = [line for i, line in kept if i < at]
    tail = [line for i, line in kept if i > at]
    return _join([*head, MARKER, job_line, *tail])


def remove_entry(text: str) -> str:
    """`text` without the managed entry; unchanged (even its last newline) when there is none."""
    lines = _split(text)
    if not _marker_indexes(lines):
        return text
    return _join(_without_entries(lines))


def _split(text: str) -> list[str]:
    # cron lines end in "\n" only; a missing final newline gets one back in _join.
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _join(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _marker_indexes(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.strip() == MARKER]


def _is_managed_job(lines: list[str], index: int) -> bool:
    # Only a line shaped like ours counts: if the user deleted the job line by hand, the line
    # now after the marker is theirs and stays.
    return index < len(lines) and bool(_JOB_SHAPE.match(lines[index]))


def _entry_indexes(lines: list[str]) -> set[int]:
    found = set()
    for i in _marker_indexes(lines):
        found.add(i)
        if _is_managed_job(lines, i + 1):
            found.add(i + 1)
    return found


def _without_entries(lines: list[str]) -> list[str]:
    drop = _entry_indexes(lines)
    return [line for i, line in enumerate(lines) if i not in drop]
