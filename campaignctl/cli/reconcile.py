from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from campaignctl.cli.common import (
    DryRunOption,
    JsonOption,
    TextfileOption,
    console,
    err_console,
    print_json,
    styled,
)
from campaignctl.cli.status import skipped_view

FAILED_CAMPAIGN_EXIT = 75  # EX_TEMPFAIL: the others ticked; the failed one is tried again next tick

if TYPE_CHECKING:
    from campaignctl.services.notify import NotifyResult
    from campaignctl.services.reconcile_result import ReconcileResult


def reconcile(
    campaign: Annotated[str | None, typer.Argument(help="Campaign name.", show_default=False)] = None,
    all_campaigns: Annotated[bool, typer.Option("--all", help="Every active campaign.")] = False,
    textfile: TextfileOption = None,
    dry_run: DryRunOption = False,
    json_out: JsonOption = False,
) -> None:
    """One tick of the control loop: observe (one sacct), decide per policy, act, log.
    Safe to run from cron: a second concurrent run exits 0 at once; if the running one has held
    the lock longer than 3 cron intervals (or CAMPAIGNCTL_STALL_AFTER), it says so on stderr (cron mails it).

    Each campaign is acted on under its lease in the database: one another process holds (any
    user, any host sharing CAMPAIGNCTL_DB_URL) is left alone this tick, and the tick still exits 0.

    A campaign whose part of the tick fails is reported (here and in `status`) and the tick goes
    on with the others; the command then exits 75, as it does when Slurm or the database is down.

    With CAMPAIGNCTL_CHAIN_HEAD=FILE set, each tick ends by writing the decision log's chain head to FILE.

    Keep FILE (mode 0600) away from the database; `campaignctl log verify --head FILE` checks against it.

    With --textfile, each tick that ran ends by writing `campaignctl metrics` for the same campaigns there.

    Example: campaignctl reconcile --all --textfile /var/lib/node_exporter/textfile/campaignctl.prom
    """
    if (campaign is None) == (not all_campaigns):
        raise typer.BadParameter("give a campaign name or --all (not both)")
    from campaignctl.services.prometheus import export_metrics
    from campaignctl.services.reconcile import reconcile as reconcile_service

    result = reconcile_service(campaign, dry_run=dry_run)
    if result.stall:
        err_console.print(result.stall, markup=False, soft_wrap=True)
    if textfile is not None and not dry_run and (result.status != "locked" or result.stall):
        export_metrics(campaign, textfile)  # a stalled holder writes nothing: the locked tick says it
    if json_out:
        print_json("reconcile", result.to_dict())
    else:
        render(result)
    if result.failed:
        raise typer.Exit(FAILED_CAMPAIGN_EXIT)


def render(result: ReconcileResult) -> None:
    if result.message:
        console.print(result.message)
    for tick in result.campaigns:
        console.print(styled((tick.name, "bold"), f" ({tick.state}): {tick.observed} attempts observed, "
                             f"{tick.changed} changed, {len(tick.decisions)} decision(s)"
                             + (f", {tick.repaired} repaired from an interrupted tick" if tick.repaired else "")))
        if tick.decisions:
            table = Table("task", "rule", "action", "status", "job", "reason")
            for d in tick.decisions:
                table.add_row(str(d.task), d.rule, d.action, d.status, d.job_id or "-", d.reason)
            console.print(table)
    if result.notify is not None:
        for line in notify_view(result.notify):
            console.print(line, markup=False, soft_wrap=True)
    for left in result.left_alone:
        console.print(styled((left.name, "bold"), f" left alone: {left.why}"))
    for failed in result.failed:
        err_console.print(styled((failed.name, "bold red"), f" failed this tick: {failed.error}"), soft_wrap=True)
    for part in skipped_view(result.skipped_lines, result.skipped):
        console.print(part)
    if result.status != "locked":
        console.print(f"{result.status}; {result.slurm_calls} Slurm call(s)"
                      + (f"; tick {result.tick_id}" if result.tick_id else "")
                      + (f"; {result.skipped_lines} line(s) skipped" if result.skipped_lines else "")
                      + (f"; {result.left_out} campaign(s) of other users left alone" if result.left_out else ""))


def notify_view(n: NotifyResult) -> list[str]:
    """One line when the tick told anyone anything (or failed to), and its first errors."""
    if not (n.queued or n.sent or n.failed or n.pending):
        return []
    later = f", {n.pending} left for the next tick" if n.pending else ""
    return [f"notify: {n.sent} sent, {n.failed} failed{later}", *(f"  {e}" for e in n.errors)]
