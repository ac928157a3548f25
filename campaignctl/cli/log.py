from __future__ import annotations

import json
from typing import Annotated

import typer

from campaignctl.cli import log_chain
from campaignctl.cli.common import JsonOption, console, local_time, print_json, styled
from campaignctl.cli.default_group import DefaultGroup

STATUS_STYLE = {"applied": "green", "failed": "red", "pending": "yellow", "proposed": "magenta",
                "awaiting-approval": "yellow", "rejected": "red", "expired": "red", "withdrawn": "red"}

log_app = typer.Typer(
    name="log",
    cls=DefaultGroup,
    help="The decision log: show it (the default: `log NAME` is `log show NAME`), verify its hash "
         "chain, export it.\n\nExample: campaignctl log lr-sweep --last 20",
)


@log_app.command("show")
def show(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    task: Annotated[int | None, typer.Option("--task", help="Only this task index.")] = None,
    last: Annotated[int | None, typer.Option("--last", min=1, help="Only the last N decisions.")] = None,
    inputs: Annotated[bool, typer.Option("--inputs", help="Show the inputs each rule saw.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Show the decision log: every decision with its rule, reason, inputs and outcome.

    `campaignctl log NAME …` is short for `campaignctl log show NAME …`.

    Example: campaignctl log show lr-sweep --task 3 --inputs
    """
    from campaignctl.core.decisions.decision_rows import members
    from campaignctl.core.screens.status import index_ranges
    from campaignctl.services.log import decision_log

    entries = decision_log(campaign, task, last)
    if json_out:
        print_json("log", [e.to_dict() for e in entries])
        return
    if not entries:
        console.print(f"no decisions yet for {campaign}")
        return
    for e in entries:
        status = e.status + (f": {e.error}" if e.error else "")
        job = e.detail.get("job_id") or e.detail.get("jobs")
        held = members(e.params)
        who = "campaign" if e.task_index < 0 else f"task {e.task_index}" + (
            f" attempt {e.inputs['attempt']}" if "attempt" in e.inputs else "")
        if held:
            who = f"{len(held)} tasks ({index_ranges(sorted(m[0] for m in held))})"
        shadow = ("SHADOW ", "magenta") if e.mode == "shadow" else ""
        console.print(styled((f"#{e.id}", "bold"), f" {local_time(e.created_at)}  {who}  ", shadow,
                             f"{e.rule} → ", (e.action, "bold"), " ", (status, STATUS_STYLE.get(e.status, "white")),
                             (f", job {job}" if job else "") + f"  ({e.policy}, tick {e.tick_id})"),
                      soft_wrap=True)
        console.print(f"    {e.reason}", soft_wrap=True)
        if e.gate:
            console.print(f"    needs approval: {e.gate}", soft_wrap=True)
        if inputs:
            console.print(f"    inputs: {json.dumps(e.inputs, sort_keys=True)}", soft_wrap=True)


log_app.command("verify")(log_chain.verify)
log_app.command("export")(log_chain.export)
