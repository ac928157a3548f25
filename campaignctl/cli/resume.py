from __future__ import annotations

from typing import Annotated

import typer

from campaignctl.cli.common import JsonOption, console, print_json


def resume(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Release even if the budget is still reached.")] = False,
    reason: Annotated[str, typer.Option("--reason", help="Why, for the decision log.")] = "",
    json_out: JsonOption = False,
) -> None:
    """Resume a campaign its budget paused: release the held pending jobs (a logged decision).
    Raise the budget first: edit the spec and `campaignctl submit` it again.

    A progressive campaign paused before its next rung resumes once the budget pays for that
    rung (exit 5 while it does not); --force lets the promotion through anyway.

    Example: campaignctl resume lr-sweep --reason "budget raised to 40 GPU-h"
    """
    from campaignctl.services.resume import resume as resume_service

    result = resume_service(campaign, force=force, reason=reason)
    if json_out:
        print_json("resume", result.to_dict())
        return
    released = ", ".join(f"{a}_[{','.join(map(str, i))}]" for a, i in result.released.items()) or "nothing held"
    console.print(f"{result.campaign}: {result.state}; released {released} ({result.status})"
                  + (f": {result.error}" if result.error else ""))
    if result.promotion:
        console.print(result.promotion, soft_wrap=True)
