"""The command line: thin typer commands over services, one error boundary (cli/boundary.py).

Command modules import their services inside the command function, never at the top: typer
builds every command's `--help` from signatures alone, and `campaignctl --help` should not pay
for SQLAlchemy, submitit or YAML (they took it from 0.15 s to 0.8 s; tests/cli/test_entry.py
holds the line, scripts/bench_cli.py measures it)."""

from __future__ import annotations

import io
import sys
from typing import Annotated

import typer

from campaignctl.cli import agent as agent_cmd
from campaignctl.cli import by_hand as by_hand_cmd
from campaignctl.cli import cron as cron_cmd
from campaignctl.cli import governance as governance_cmd
from campaignctl.cli import log as log_cmd
from campaignctl.cli import nodes as nodes_cmd
from campaignctl.cli import notify as notify_cmd
from campaignctl.cli import output as output_cmd
from campaignctl.cli import policy as policy_cmd
from campaignctl.cli import profile as profile_cmd
from campaignctl.cli import prometheus as prometheus_cmd
from campaignctl.cli import reconcile as reconcile_cmd
from campaignctl.cli import report as report_cmd
from campaignctl.cli import results as results_cmd
from campaignctl.cli import resume as resume_cmd
from campaignctl.cli import simulate as simulate_cmd
from campaignctl.cli import status as status_cmd
from campaignctl.cli import submit as submit_cmd
from campaignctl.cli import top as top_cmd
from campaignctl.cli.boundary import BoundaryGroup, flush_stdout
from campaignctl.cli.help_format import plain_parameters

plain_parameters()
app = typer.Typer(
    name="campaignctl",
    cls=BoundaryGroup,
    help="Orchestrate ML training campaigns on Slurm: submit a YAML campaign as job arrays, "
         "watch it, keep it moving.\n\nExample: campaignctl submit templates/sweep.yaml",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: no boxes to pipe or grep, no markup read in docstrings, 80 ms less
    context_settings={"help_option_names": ["--help", "-h"]},  # inherited by every subcommand
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # only here: `campaignctl --help` does without it

        typer.echo(f"campaignctl {version('campaignctl')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Print campaignctl's version and exit.")] = False,
) -> None:
    pass


# short_help: the one line each gets in `campaignctl --help` (click cuts a longer docstring line with "...")
app.command("submit", short_help="Submit a campaign spec as Slurm job arrays.")(submit_cmd.submit)
app.command("status", short_help="Where campaigns, or one campaign's tasks, stand.")(status_cmd.status)
app.command("output", short_help="What a task's program printed.")(output_cmd.output)
app.command("results", short_help="One row per config: its metric, efficiency and cost.")(results_cmd.results)
app.command("top", short_help="A live terminal view of campaigns, read from the store.")(top_cmd.top)
app.command("reconcile", short_help="One tick of the control loop (what cron runs).")(reconcile_cmd.reconcile)
app.add_typer(log_cmd.log_app, name="log", short_help="Show, verify or export the decision log.")
app.command("resume", short_help="Resume a campaign its budget paused.")(resume_cmd.resume)
app.command("cancel", short_help="Cancel a campaign or some of its tasks.")(by_hand_cmd.cancel)
app.command("retry", short_help="Run again tasks given up or cancelled.")(by_hand_cmd.retry)
app.command("revisions", short_help="List a campaign's revisions and their diffs.")(governance_cmd.revisions)
app.command("rollback", short_help="Return a campaign to an earlier revision.")(governance_cmd.rollback)
app.command("approvals", short_help="List decisions waiting for approval.")(governance_cmd.approvals)
app.command("approve", short_help="Approve a decision that waits for approval.")(governance_cmd.approve)
app.command("reject", short_help="Reject a decision that waits for approval.")(governance_cmd.reject)
app.add_typer(cron_cmd.cron_app, name="cron", short_help="Run reconcile from your crontab.")
app.add_typer(policy_cmd.policy_app, name="policy", short_help="Change, shadow, promote or replay a policy.")
app.add_typer(profile_cmd.profile_app, name="profile", short_help="What a kind of work used: right_size's history.")
app.add_typer(nodes_cmd.nodes_app, name="nodes", short_help="Bad and slow nodes remembered; forgive one.")
app.command("report", short_help="Write an HTML report with charts.")(report_cmd.report)
app.command("metrics", short_help="Campaign metrics for Prometheus.")(prometheus_cmd.metrics)
app.command("simulate", short_help="Try policies on a simulated Slurm cluster.")(simulate_cmd.simulate)
app.add_typer(notify_cmd.notify_app, name="notify", short_help="Test a notify channel; list what it was told.")
app.command("mcp", short_help="Read-only tools for a coding assistant (MCP, stdio).")(agent_cmd.mcp)


def main() -> None:
    """Entry point. typer reports usage errors (exit 2) and Ctrl-C (130); every other way a
    command ends goes through the boundary (cli/boundary.py). The name is fixed so that shell
    completion (`--install-completion`) works the same under `python -m campaignctl`."""
    _escape_unencodable_output()
    try:
        app(prog_name="campaignctl")
    finally:
        flush_stdout()  # help and --version are written outside the boundary


def _escape_unencodable_output() -> None:
    """A terminal or pipe whose encoding cannot show a character (PYTHONIOENCODING=ascii, a C
    locale) gets `\\u2192` instead of a UnicodeEncodeError out of a half-printed table."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
