from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from campaignctl.cli.common import DryRunOption, JsonOption, TextfileOption, console, err_console, print_json

if TYPE_CHECKING:
    from campaignctl.services.cron import CronResult

cron_app = typer.Typer(
    name="cron",
    help="Keep campaigns moving without a terminal: one line in your crontab runs "
         "`campaignctl reconcile` every few minutes.\n\nExample: campaignctl cron install --every 5",
    no_args_is_help=True,
)


@cron_app.command("install")
def install(
    every: Annotated[int, typer.Option("--every", help="Minutes between runs (1-59).")] = 5,
    campaign: Annotated[str | None, typer.Option("--campaign", help="Reconcile only this campaign; "
                                                 "default: all.", show_default=False)] = None,
    textfile: TextfileOption = None,
    dry_run: DryRunOption = False,
    json_out: JsonOption = False,
) -> None:
    """Add (or replace) the campaignctl line in your crontab; other lines stay as they are.

    The line carries SLURM_CONF, PATH, XDG_STATE_HOME, CAMPAIGNCTL_DB_URL and CAMPAIGNCTL_CHAIN_HEAD from this shell.

    Its output is appended to reconcile.log in the state directory. With --textfile, every tick also
    rewrites the Prometheus export there (see `campaignctl metrics`).

    Example: campaignctl cron install --every 5 --textfile /var/lib/node_exporter/textfile/campaignctl.prom
    """
    from campaignctl.services import cron as cron_service

    render(cron_service.install(every, campaign, dry_run=dry_run, textfile=textfile), json_out)


@cron_app.command("remove")
def remove(dry_run: DryRunOption = False, json_out: JsonOption = False) -> None:
    """Delete the campaignctl line from your crontab; other lines stay as they are.

    Example: campaignctl cron remove --dry-run
    """
    from campaignctl.services import cron as cron_service

    render(cron_service.remove(dry_run=dry_run), json_out)


@cron_app.command("show")
def show(json_out: JsonOption = False) -> None:
    """Print the campaignctl line in your crontab, if there is one.

    Example: campaignctl cron show --json
    """
    from campaignctl.services import cron as cron_service

    render(cron_service.show(), json_out)


def render(result: CronResult, json_out: bool) -> None:
    if json_out:
        print_json(f"cron {result.action}", result.to_dict())
        return
    if result.note:
        err_console.print(result.note, markup=False, soft_wrap=True)
    console.print(_headline(result))
    if result.entry:
        console.print(result.entry, soft_wrap=True)
    if result.installed and result.action != "remove":
        console.print(f"log: {result.log_path}", soft_wrap=True)


def _headline(result: CronResult) -> str:
    if result.action == "show":
        return "installed:" if result.installed else "not installed: campaignctl cron install --every 5"
    verb = result.action  # install | remove
    if not result.changed:
        return "already installed, unchanged:" if verb == "install" else "not installed, nothing to remove"
    if result.dry_run:
        return f"dry run, crontab not changed; would {verb}:"
    return "installed:" if verb == "install" else "removed:"
