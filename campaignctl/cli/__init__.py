"""The command line: thin typer commands over services, one error boundary."""

from __future__ import annotations

import io
import os
import sys

import typer

from campaignctl.cli import cron as cron_cmd
from campaignctl.cli import governance as governance_cmd
from campaignctl.cli import log as log_cmd
from campaignctl.cli import metrics as metrics_cmd
from campaignctl.cli import notify as notify_cmd
from campaignctl.cli import policy as policy_cmd
from campaignctl.cli import reconcile as reconcile_cmd
from campaignctl.cli import report as report_cmd
from campaignctl.cli import results as results_cmd
from campaignctl.cli import resume as resume_cmd
from campaignctl.cli import status as status_cmd
from campaignctl.cli import submit as submit_cmd
from campaignctl.cli.common import err_console, styled
from campaignctl.core.errors import CampaignctlError

app = typer.Typer(
    name="campaignctl",
    help="Orchestrate ML training campaigns on Slurm: submit a YAML campaign as job arrays, "
         "watch it, keep it moving.\n\nExample: campaignctl submit templates/sweep.yaml",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("submit")(submit_cmd.submit)
app.command("status")(status_cmd.status)
app.command("results")(results_cmd.results)
app.command("reconcile")(reconcile_cmd.reconcile)
app.add_typer(log_cmd.log_app, name="log")
app.command("resume")(resume_cmd.resume)
app.command("revisions")(governance_cmd.revisions)
app.command("rollback")(governance_cmd.rollback)
app.command("approvals")(governance_cmd.approvals)
app.command("approve")(governance_cmd.approve)
app.command("reject")(governance_cmd.reject)
app.add_typer(cron_cmd.cron_app, name="cron")
app.add_typer(policy_cmd.policy_app, name="policy")
app.command("report")(report_cmd.report)
app.command("metrics")(metrics_cmd.metrics)
app.add_typer(notify_cmd.notify_app, name="notify")


def main() -> None:
    """Entry point. typer's standalone mode handles usage errors (exit 2) and Ctrl-C; every
    CampaignctlError becomes `error:`/`hint:` on stderr and its exit code; anything else is a bug."""
    _escape_unencodable_output()
    try:
        app()
    except CampaignctlError as exc:
        err_console.print(styled(("error:", "bold red"), f" {exc.message}"), soft_wrap=True)
        if exc.hint:
            err_console.print(styled(("hint:", "bold"), f" {exc.hint}"), soft_wrap=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # the boundary: no traceback unless asked for
        if os.environ.get("CAMPAIGNCTL_DEBUG"):
            raise
        err_console.print(styled(("error:", "bold red"), f" internal error: {type(exc).__name__}: {exc}"),
                          soft_wrap=True)
        err_console.print(styled(("hint:", "bold"), " rerun with CAMPAIGNCTL_DEBUG=1 for a traceback and report it"))
        sys.exit(1)


def _escape_unencodable_output() -> None:
    """A terminal or pipe whose encoding cannot show a character (PYTHONIOENCODING=ascii, a C
    locale) gets `\\u2192` instead of a UnicodeEncodeError out of a half-printed table."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
