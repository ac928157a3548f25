from __future__ import annotations

from typing import Annotated

import typer

from campaignctl.cli.common import JsonOption, console, print_json
from campaignctl.services.notify import send_test

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
    result = send_test(campaign)
    if json_out:
        print_json("notify test", result.to_dict())
        return
    for channel in result.channels:
        console.print(f"{result.campaign}: sent a test event to {channel}", markup=False, soft_wrap=True)
