"""Governance commands: revisions, rollback, approvals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from campaignctl.cli.common import (
    DryRunOption,
    JsonOption,
    console,
    local_time,
    plain_table,
    print_json,
    styled,
    whole_rows,
)

if TYPE_CHECKING:
    from campaignctl.services.approvals import VerdictResult
    from campaignctl.services.revisions import RevisionsResult
    from campaignctl.services.rollback import RollbackResult

ReasonOption = Annotated[str, typer.Option("--reason", help="Why, for the decision log.")]
DecisionIdArgument = Annotated[int, typer.Argument(help="Decision id (see `campaignctl approvals`).",
                                                   show_default=False)]


def revisions(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    diff: Annotated[int | None, typer.Option("--diff", help="Show this revision's diff to the one before it.")] = None,
    mark_good_rev: Annotated[int | None, typer.Option("--mark-good", help="Mark this revision known-good.")] = None,
    reason: ReasonOption = "",
    wide: Annotated[bool, typer.Option("--wide", help="Add the shadow policy and rules, the content hash "
                                                      "and the time zone.")] = False,
    json_out: JsonOption = False,
) -> None:
    """List a campaign's revisions: who changed what and why, which are known-good, and diffs.
    One line each at 80 columns (the reason wraps); --wide adds shadow, hash and time zone.

    Example: campaignctl revisions lr-sweep --diff 3
    """
    from campaignctl.services.revisions import list_revisions, mark_good

    if mark_good_rev is not None:
        mark_good(campaign, mark_good_rev, reason)
    result = list_revisions(campaign, diff)
    if json_out:
        print_json("revisions", result.to_dict())
        return
    with whole_rows(wide):
        render_revisions(result, diff, wide)


def render_revisions(result: RevisionsResult, diff: int | None, wide: bool = False) -> None:
    """Every column that tells revisions apart whole (rev, kind, when, author, policy); the
    reason last, wrapping."""
    table = plain_table("rev", "kind", "when", "author", "policy", "good")
    if wide:
        table.add_column("shadow", no_wrap=True)
        table.add_column("hash", no_wrap=True)
    table.add_column("reason", ratio=1)
    for r in result.revisions:
        shadow = ", ".join(filter(None, [r.shadow_policy and f"candidate {r.shadow_policy}", *r.shadow_rules]))
        when = local_time(r.created_at)  # `2026-11-27 19:15:27 CET`; to the minute at 80 columns
        table.add_row(f"{r.number}{'*' if r.current else ''}",
                      r.kind + (f"←{r.source_revision}" if r.source_revision else ""),
                      when if wide else f"{when[:16]}{when[19:]}", r.author, r.policy, "yes" if r.known_good else "-",
                      *([shadow or "-", r.content_hash[:12]] if wide else []), r.reason or "-")
    console.print(table)
    console.print(f"* current revision of {result.campaign}: {result.current}")
    for r in result.revisions:
        if r.number == diff:
            console.print(r.diff, soft_wrap=True)


def rollback(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    to: Annotated[int | None, typer.Option("--to", help="Target revision (default: the last known-good).")] = None,
    dry_run: DryRunOption = False,
    reason: ReasonOption = "",
    json_out: JsonOption = False,
) -> None:
    """Return a campaign to an earlier revision: it becomes current again, and pending work gets
    its resources back (scontrol update, or cancel-and-resubmit where Slurm cannot update).
    Running and finished attempts are left alone. Every step is a logged decision.

    Example: campaignctl rollback lr-sweep --dry-run
    """
    from campaignctl.services.rollback import rollback as rollback_service

    result = rollback_service(campaign, to, dry_run, reason)
    if json_out:
        print_json("rollback", result.to_dict())
        return
    render_rollback(result)


def render_rollback(result: RollbackResult) -> None:
    if result.dry_run:
        console.print(f"dry run: {result.campaign} would roll back from revision {result.from_revision} "
                      f"to the content of revision {result.target}; nothing changed")
    else:
        console.print(f"{result.campaign}: revision {result.new_revision} is current, with the content of "
                      f"revision {result.target} (was {result.from_revision})")
    for step in result.steps:
        job = f", job {step.job_id}" if step.job_id else ""
        console.print(f"  task {step.task}: {step.action} [{step.status}{job}] {step.reason}", soft_wrap=True)
    if not result.steps:
        console.print("  no pending work needs compensating")
    for note in result.left_alone:
        console.print(f"  left alone: {note}", soft_wrap=True)
    if result.withdrawn:
        console.print(f"  withdrawn (awaited approval): {', '.join(f'#{i}' for i in result.withdrawn)}")


def approvals(
    campaign: Annotated[str | None, typer.Argument(help="Campaign name; omit for all.")] = None,
    json_out: JsonOption = False,
) -> None:
    """List decisions waiting for approval, with why they wait.

    Example: campaignctl approvals lr-sweep
    """
    from campaignctl.services.approvals import pending_approvals

    waiting = pending_approvals(campaign)
    if json_out:
        print_json("approvals", [e.to_dict() for e in waiting])
        return
    if not waiting:
        console.print("nothing waits for approval")
    for e in waiting:
        console.print(styled((f"#{e.id}", "bold"), f" {e.campaign} task {e.task_index}: {e.rule} → {e.action} "
                             f"({local_time(e.created_at)})"), soft_wrap=True)
        console.print(f"    {e.reason}", soft_wrap=True)
        console.print(f"    waits because: {e.gate}", soft_wrap=True)


def approve(
    decision_id: DecisionIdArgument,
    reason: ReasonOption = "",
    json_out: JsonOption = False,
) -> None:
    """Approve a decision that waits for approval; it is carried out at once, as it was decided.

    Example: campaignctl approve 42 --reason "memory checked with the data team"
    """
    from campaignctl.services.approvals import approve as approve_service

    _render_verdict(approve_service(decision_id, reason), json_out)


def reject(
    decision_id: DecisionIdArgument,
    reason: ReasonOption = "",
    json_out: JsonOption = False,
) -> None:
    """Reject a decision that waits for approval; it is never carried out (the task stops there).

    Example: campaignctl reject 42 --reason "too large for this allocation"
    """
    from campaignctl.services.approvals import reject as reject_service

    _render_verdict(reject_service(decision_id, reason), json_out)


def _render_verdict(result: VerdictResult, json_out: bool) -> None:
    if json_out:
        print_json(result.verdict, result.to_dict())
        return
    job = f", job {result.job_id}" if result.job_id else ""
    console.print(f"decision #{result.decision_id} ({result.campaign}) {result.verdict}d: {result.status}{job}"
                  + (f": {result.error}" if result.error else ""))
