"""`campaignctl policy …`: change a running campaign's policy (each change a revision)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from campaignctl.cli.common import JsonOption, console, err_console, print_json

if TYPE_CHECKING:
    from campaignctl.services.revisions import RevisionsResult

FullOption = Annotated[bool, typer.Option("--full", help="Print the whole diff of the revision, not the "
                                                         "settings that changed.")]

policy_app = typer.Typer(help="Change, shadow, promote and replay a campaign's policy.\n\n"
                              "Example: campaignctl policy replay lr-sweep policies/default.yaml",
                         no_args_is_help=True)


@policy_app.command("set")
def set_(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    policy_file: Annotated[str, typer.Argument(help="Policy YAML file (or a built-in policy name).",
                                               show_default=False)],
    shadow: Annotated[bool, typer.Option("--shadow", help="Run it next to the current policy as a candidate "
                                                          "that only proposes.")] = False,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept with the new revision).")] = "",
    full: FullOption = False,
    json_out: JsonOption = False,
) -> None:
    """Change a campaign's policy mid-flight: a new revision, applied from the next reconcile.
    Work already queued keeps its resources; `campaignctl rollback` undoes the change. Prints the
    settings that changed (--full: the whole diff).

    Example: campaignctl policy set lr-sweep my-policy.yaml --reason "grow memory faster"
    """
    from campaignctl.services.revisions import set_policy

    _render(set_policy(campaign, policy_file, reason, shadow), json_out, "policy set", full)


@policy_app.command("promote")
def promote(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    rule: Annotated[str | None, typer.Option("--rule", help="Promote only this shadow rule.")] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept with the new revision).")] = "",
    full: FullOption = False,
    json_out: JsonOption = False,
) -> None:
    """Let shadow decisions act: the candidate policy becomes the enforced one, or the policy's
    shadow rules (all, or --rule) start to act. A new revision.

    Example: campaignctl policy promote lr-sweep --rule data_starved
    """
    from campaignctl.services.revisions import promote as promote_service

    _render(promote_service(campaign, reason, rule), json_out, "policy promote", full)


@policy_app.command("replay")
def replay(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    policy_file: Annotated[str, typer.Argument(help="Policy YAML file (or a built-in policy name).",
                                               show_default=False)],
    json_out: JsonOption = False,
) -> None:
    """Re-run the policy's decisions over the campaign's recorded ticks and show where they differ
    from what was actually decided, with the worst-case cost of each side's retries. Changes
    nothing; exits 0 whether or not the decisions differ.

    The campaign comes first, as in every command; the old order (FILE NAME) still works for now
    when the first word can only be a policy file, with a note on stderr.

    Example: campaignctl policy replay lr-sweep policies/cost-saver.yaml
    """
    from campaignctl.cli.replay_view import render_replay
    from campaignctl.services.replay import replay_policy

    campaign, policy_file = _campaign_first(campaign, policy_file)
    result = replay_policy(policy_file, campaign)
    if json_out:
        print_json("policy replay", result.to_dict())
    else:
        render_replay(result)


def _campaign_first(first: str, second: str) -> tuple[str, str]:
    """(campaign, policy) from `replay NAME FILE`, or from the old `replay FILE NAME` when only
    that reading fits: the first word is an existing policy file (a campaign name holds no `/`,
    and `x.yaml` is no name anyone gives) and the second cannot be a policy file."""
    from pathlib import Path

    from campaignctl.core.spec.spec import names_policy_file

    if names_policy_file(first) and Path(first).is_file() and not names_policy_file(second):
        err_console.print(f"note: `policy replay FILE NAME` is deprecated; the campaign comes first: "
                          f"campaignctl policy replay {second} {first}", soft_wrap=True)
        return second, first
    return first, second


def _render(result: RevisionsResult, json_out: bool, command: str, full: bool) -> None:
    if json_out:
        print_json(command, result.to_dict())
        return
    rev = next(r for r in result.revisions if r.current)
    shadow = ", ".join(filter(None, [rev.shadow_policy and f"candidate {rev.shadow_policy}", *rev.shadow_rules]))
    console.print(f"{result.campaign}: revision {rev.number} is current ({rev.kind}: {rev.reason}); "
                  f"policy {rev.policy}" + (f"; in shadow: {shadow}" if shadow else ""))
    if full:
        console.print(rev.diff, soft_wrap=True, markup=False)
        return
    for line in rev.summary or ["no setting changed"]:
        console.print(line, soft_wrap=True, markup=False)
