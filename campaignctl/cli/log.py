from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from campaignctl.cli.common import JsonOption, console, print_json
from campaignctl.services.log import decision_log


def log(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    task: Annotated[int | None, typer.Option("--task", help="Only this task index.")] = None,
    last: Annotated[int | None, typer.Option("--last", min=1, help="Only the last N decisions.")] = None,
    inputs: Annotated[bool, typer.Option("--inputs", help="Show the inputs each rule saw.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Show the decision log: every decision with its rule, reason, inputs and outcome.

    Example: campaignctl log lr-sweep --task 3 --inputs
    """
    entries = decision_log(campaign, task, last)
    if json_out:
        print_json("log", [e.to_dict() for e in entries])
        return
    if not entries:
        console.print(f"no decisions yet for {campaign}")
        return
    table = Table("id", "tick", "time", "task", "attempt", "policy", "rule", "action", "status", "reason")
    for e in entries:
        status = e.status + (f": {e.error}" if e.error else "")
        reason = e.reason + (f"\ninputs: {json.dumps(e.inputs, sort_keys=True)}" if inputs else "")
        table.add_row(str(e.id), str(e.tick_id), e.created_at[11:19], str(e.task_index),
                      str(e.inputs.get("attempt", "-")), e.policy, e.rule, e.action, status, reason)
    console.print(table)
