from __future__ import annotations

from typing import Annotated

import typer

from campaignctl.cli.common import JsonOption, print_json
from campaignctl.cli.replay_view import render_replay
from campaignctl.services.replay import replay_policy

policy_app = typer.Typer(
    name="policy",
    help="Work with policies: see how one would have decided over a campaign's recorded history."
         "\n\nExample: campaignctl policy replay policies/default.yaml lr-sweep",
    no_args_is_help=True,
)


@policy_app.command("replay")
def replay(
    policy_file: Annotated[str, typer.Argument(help="Policy YAML file (or a built-in policy name).",
                                               show_default=False)],
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    json_out: JsonOption = False,
) -> None:
    """Re-run the policy's decisions over the campaign's recorded ticks and show where they differ
    from what was actually decided, with the worst-case cost of each side's retries. Changes
    nothing; exits 0 whether or not the decisions differ.

    Example: campaignctl policy replay policies/cost-saver.yaml lr-sweep
    """
    result = replay_policy(policy_file, campaign)
    if json_out:
        print_json("policy replay", result.to_dict())
    else:
        render_replay(result)
