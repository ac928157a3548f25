from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from campaignctl.cli.common import JsonOption, console, print_json

notify_app = typer.Typer(
    name="notify",
    help="The campaign's `notify:` channels (webhook, command): alerts, holds, approvals waited on, "
         "give-ups and the finish, told once each after the tick that decided them.\n\n"
         "Example: campaignctl notify test lr-sweep",
    no_args_is_help=True,
)


@notify_app.command("test")
def test(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    json_out: JsonOption = False,
) -> None:
    """Send a sample event (event "test") on every channel of the campaign's current `notify:`,
    with its timeout and retries. Exits 69 with the reason if a channel does not take it; the
    webhook is shown by scheme, host and port only (its path or query may hold a token).

    Example: campaignctl notify test lr-sweep
    """
    from campaignctl.services.notify import send_test

    result = send_test(campaign)
    if json_out:
        print_json("notify test", result.to_dict())
        return
    for channel in result.channels:
        console.print(f"{result.campaign}: sent a test event to {channel}", markup=False, soft_wrap=True)


@notify_app.command("list")
def list_(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    json_out: JsonOption = False,
) -> None:
    """What the campaign's channels were told (sent), will be told at the next tick (pending), or
    could not be told (failed: a 4xx answer, or every retry failed), with the last error.

    Example: campaignctl notify list lr-sweep
    """
    from campaignctl.services.notify import notify_queue

    result = notify_queue(campaign)
    if json_out:
        print_json("notify list", result.to_dict())
        return
    console.print(f"{result.campaign}: " + (", ".join(result.channels) or "no notify channel"),
                  markup=False, soft_wrap=True)
    if result.notices:
        table = Table("event", "task", "decision", "channel", "status", "tries", "sent", "last error")
        for n in result.notices:
            table.add_row(n.event, "-" if n.task is None else str(n.task), str(n.decision_id or "-"), n.channel,
                          n.status, str(n.tries), n.sent_at or "-", n.last_error or "-")
        console.print(table)
