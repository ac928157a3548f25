"""`cancel` and `retry`: a person's decisions on a campaign's tasks (services/by_hand.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from campaignctl.cli.common import JsonOption, console, print_json

if TYPE_CHECKING:
    from campaignctl.services.by_hand import ByHandResult

TaskOption = Annotated[str | None, typer.Option(
    "--task", help="Task indices and ranges, e.g. 0,3-5.", show_default=False)]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why, for the decision log.")]


def cancel(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    task: TaskOption = None,
    reason: ReasonOption = "",
    json_out: JsonOption = False,
) -> None:
    """Cancel a campaign, or some of its tasks: scancel their queued or running jobs (yours
    only), give up the failures the policy had not answered yet, and log each as a decision.
    Without --task the whole campaign is cancelled: submissions still waiting to reach Slurm
    are dropped, and reconcile retries and promotes nothing more.

    Example: campaignctl cancel lr-sweep --task 3,5-7 --reason "diverged"
    """
    from campaignctl.core.spec.task_selection import parse_task_list
    from campaignctl.services.by_hand import cancel as cancel_service

    result = cancel_service(campaign, parse_task_list(task) if task is not None else None, reason)
    _render("cancel", result, json_out)


def retry(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    task: TaskOption = None,
    state: Annotated[str | None, typer.Option(
        "--state", help="Only tasks whose latest attempt ended in these states, e.g. FAILED,CANCELLED.",
        show_default=False)] = None,
    reason: ReasonOption = "",
    force: Annotated[bool, typer.Option("--force", help="Retry even if the budget is spent.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Run again tasks that were given up or cancelled: one new attempt each, under the
    campaign's current revision (fix the cause, `campaignctl submit` the spec, then retry).
    Logged as decisions; the policy's approval limits and the budget apply.

    Example: campaignctl retry lr-sweep --state FAILED --reason "fixed the data path"
    """
    from campaignctl.core.base.errors import UsageError
    from campaignctl.core.spec.task_selection import parse_state_list, parse_task_list
    from campaignctl.services.by_hand import retry as retry_service

    if task is None and state is None:
        raise UsageError("say which tasks to retry: --task 0,3-5 and/or --state FAILED",
                         f"`campaignctl status {campaign}` lists each task's state")
    result = retry_service(campaign, parse_task_list(task) if task is not None else None,
                           parse_state_list(state) if state is not None else None, reason, force)
    _render("retry", result, json_out)


def _render(command: str, result: ByHandResult, json_out: bool) -> None:
    if json_out:
        print_json(command, result.to_dict())
        return
    for d in result.decisions:
        said = f": {d['error']}" if d["error"] else f", job {d['job_id']}" if d.get("job_id") else ""
        console.print(f"task {d['task']}: {d['action']} ({d['status']}){said}", soft_wrap=True)
    for s in result.skipped:
        console.print(f"task {s['task']}: left as it is, {s['why']}", soft_wrap=True)
    if result.abandoned:
        console.print(f"{len(result.abandoned)} submission(s) that had not reached Slurm dropped")
    done = len(result.decisions)
    console.print(f"{result.campaign}: {result.state}; {done} decision(s) by hand")
