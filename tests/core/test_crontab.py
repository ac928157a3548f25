"""The managed crontab entry: rendering, quoting through cron's `%` rewrite, merge and removal."""

from __future__ import annotations

import shlex

import pytest

from campaignctl.core.base.crontab import (
    MARKER,
    MAX_COMMAND_BYTES,
    CronError,
    CronJob,
    cron_environment,
    find_entry,
    install_entry,
    remove_entry,
    render_entry,
    render_job_line,
)

PROGRAM = ("/home/u/.venv/bin/campaignctl",)
LOG = "/home/u/.local/state/campaignctl/reconcile.log"


def make_job(every: int = 5, campaign: str | None = None, env: dict[str, str] | None = None,
             program: tuple[str, ...] = PROGRAM, log: str = LOG) -> CronJob:
    return CronJob(every, program, log, campaign, tuple((env or {}).items()))


def cron_rewrite(command: str, bsd: bool = False) -> str:
    """What cron hands to `sh -c`: cronie/Debian do_command.c strip `\\` only before `%` and cut
    the command at the first unescaped `%`; FreeBSD also turns `\\\\` into `\\`."""
    out: list[str] = []
    escaped = False
    for ch in command:
        if escaped:
            escaped = False
            if ch == "%" or (bsd and ch == "\\"):
                out[-1] = ch
                continue
            out.append(ch)
            continue
        if ch == "%":
            break
        escaped = ch == "\\"
        out.append(ch)
    return "".join(out)


def sh_words(line: str, bsd: bool = False) -> list[str]:
    return shlex.split(cron_rewrite(line.split(" ", 5)[5], bsd))


@pytest.mark.parametrize("every", [1, 5, 59])
def test_schedule_is_every_n_minutes(every: int) -> None:
    assert render_job_line(make_job(every)).startswith(f"*/{every} * * * * ")


@pytest.mark.parametrize("every", [0, 60, -5])
def test_every_outside_1_to_59_is_an_input_error(every: int) -> None:
    with pytest.raises(CronError) as info:
        render_job_line(make_job(every))
    assert info.value.exit_code == 3 and f"--every must be 1 to 59 minutes, got {every}" in info.value.message
    assert "crontab -e" in info.value.hint


@pytest.mark.parametrize(("campaign", "tail"), [
    (None, ["reconcile", "--all", ">>", LOG, "2>&1"]),
    ("lr-sweep", ["reconcile", "lr-sweep", ">>", LOG, "2>&1"])])
def test_command_runs_reconcile_and_appends_to_the_log(campaign: str | None, tail: list[str]) -> None:
    assert sh_words(render_job_line(make_job(campaign=campaign))) == [*PROGRAM, *tail]


@pytest.mark.parametrize("campaign", ["--all", "a b", "", "x;rm -rf ~"])
def test_campaign_must_be_a_campaign_name(campaign: str) -> None:
    with pytest.raises(CronError, match="is not a campaign name"):
        render_job_line(make_job(campaign=campaign))


@pytest.mark.parametrize(("env", "program", "log", "named"), [
    ({"SLURM_CONF": "/etc/slurm.conf\n* * * * * evil"}, PROGRAM, LOG, "SLURM_CONF"),
    ({"PATH": "/bin\r"}, PROGRAM, LOG, "PATH"),
    ({"CAMPAIGNCTL_DB_URL": "sqlite:///x\x00"}, PROGRAM, LOG, "CAMPAIGNCTL_DB_URL"),
    ({}, ("/opt/camp\naign",), LOG, "program"),
    ({}, PROGRAM, "/tmp/log\n", "log path")])
def test_newline_cr_or_nul_anywhere_is_refused(env: dict[str, str], program: tuple[str, ...], log: str,
                                               named: str) -> None:
    with pytest.raises(CronError) as info:
        render_job_line(make_job(env=env, program=program, log=log))
    assert info.value.message.startswith(f"{named} contains a newline, carriage return or NUL")


HOSTILE = [
    "/etc/slurm/slurm.conf",
    "/path with spaces/slurm.conf",
    "100%",
    "%%%",
    "postgresql://u:p%40ss@db/campaigns",
    "it's",
    "back\\slash",
    "trailing\\",
    "back\\%percent",
    "two\\\\%percents\\\\",
    "$HOME `id` $(id) ; | & > < * ? ~ # !",
    '"double"',
    "ünïcödé",
]


@pytest.mark.parametrize("bsd", [False, True], ids=["cronie-debian", "freebsd"])
@pytest.mark.parametrize("value", HOSTILE)
def test_every_value_reaches_sh_unchanged_after_crons_percent_rewrite(value: str, bsd: bool) -> None:
    env = {"SLURM_CONF": value, "PATH": value, "XDG_STATE_HOME": value, "CAMPAIGNCTL_DB_URL": value}
    line = render_job_line(make_job(env=env, program=(value,), log=value))
    assert sh_words(line, bsd) == [*(f"{k}={value}" for k in env), value, "reconcile", "--all", ">>", value, "2>&1"]


def test_no_percent_is_left_unescaped() -> None:
    line = render_job_line(make_job(env={"CAMPAIGNCTL_DB_URL": "postgresql://u:a%b\\%c@h/d"}))
    assert line.count("%") == line.count("\\%") == 2
    assert "\\\\" not in line


def test_a_command_cron_would_truncate_is_refused() -> None:
    long_path = ":".join(f"/opt/modules/tool{i}/bin" for i in range(60))
    with pytest.raises(CronError) as info:
        render_job_line(make_job(env={"PATH": long_path}))
    assert f"cuts it at {MAX_COMMAND_BYTES}" in info.value.message and "shorter PATH" in info.value.hint


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, ()),
    ({"HOME": "/home/u", "PATH": "/usr/bin:/bin"}, (("PATH", "/usr/bin:/bin"),)),
    ({"PATH": "/a:/usr/bin:/a:/bin:/usr/bin"}, (("PATH", "/a:/usr/bin:/bin"),)),
    ({"XDG_STATE_HOME": "", "SLURM_CONF": ""}, ()),
    ({"CAMPAIGNCTL_DB_URL": "sqlite:////x.db", "XDG_STATE_HOME": "/s", "PATH": "/bin", "SLURM_CONF": "/c"},
     (("SLURM_CONF", "/c"), ("PATH", "/bin"), ("XDG_STATE_HOME", "/s"), ("CAMPAIGNCTL_DB_URL", "sqlite:////x.db"))),
    ({"CAMPAIGNCTL_CHAIN_HEAD": "/safe/head.json"}, (("CAMPAIGNCTL_CHAIN_HEAD", "/safe/head.json"),)),
    ({"CAMPAIGNCTL_STALL_AFTER": "20m"}, (("CAMPAIGNCTL_STALL_AFTER", "20m"),)),  # the locked tick judges by it
    ({"CAMPAIGNCTL_LEASE_TTL": "10m"}, (("CAMPAIGNCTL_LEASE_TTL", "10m"),)),  # every tick's leases last as long
])
def test_cron_environment_picks_what_a_cron_shell_lacks(environ: dict[str, str],
                                                        expected: tuple[tuple[str, str], ...]) -> None:
    assert cron_environment(environ) == expected


LINE = render_job_line(make_job())
NEWER = render_job_line(make_job(every=10))
ENTRY = f"{MARKER}\n{LINE}\n"
USER = ("SHELL=/bin/bash\nMAILTO=\"me@example.org\"\n# nightly backup  \n"
        "30 2 * * *\trsync -a ~/data /backup  # keep\n\n@reboot ~/bin/start %more\\%\n")


@pytest.mark.parametrize(("before", "after"), [
    ("", ENTRY),
    (USER, USER + ENTRY),
    (USER + ENTRY, USER + ENTRY),  # installing twice leaves one entry
    ("0 * * * * a\n" + f"{MARKER}\n{NEWER}\n" + "5 * * * * b\n", "0 * * * * a\n" + ENTRY + "5 * * * * b\n"),
    (ENTRY + USER + ENTRY, ENTRY + USER),  # duplicates collapse into the first one's place
    ("0 * * * * no-final-newline", "0 * * * * no-final-newline\n" + ENTRY),
])
def test_install_keeps_one_entry_and_every_other_line(before: str, after: str) -> None:
    assert install_entry(before, LINE) == after


@pytest.mark.parametrize(("before", "after"), [
    (USER + ENTRY, USER),
    (ENTRY + USER, USER),
    (USER, USER),
    ("0 * * * * no-final-newline", "0 * * * * no-final-newline"),  # nothing to remove: untouched
    ("", ""),
    (f"{MARKER}\n30 2 * * * mine\n", "30 2 * * * mine\n"),  # job line deleted by hand: keep theirs
])
def test_remove_deletes_only_the_managed_entry(before: str, after: str) -> None:
    assert remove_entry(before) == after


@pytest.mark.parametrize(("text", "found"), [
    ("", None), (USER, None), (USER + ENTRY, LINE), (f"{MARKER}\n30 2 * * * mine\n", None)])
def test_find_entry(text: str, found: str | None) -> None:
    assert find_entry(text) == found


def test_render_entry_is_marker_then_job_line() -> None:
    assert render_entry(make_job()) == ENTRY
