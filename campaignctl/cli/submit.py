from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from campaignctl.cli.common import DryRunOption, JsonOption, console, print_json, styled

if TYPE_CHECKING:
    from campaignctl.services.submit import SubmitResult


def submit(
    spec: Annotated[Path, typer.Argument(help="Campaign spec (YAML).", show_default=False)],
    dry_run: DryRunOption = False,
    reason: Annotated[str, typer.Option("--reason", help="Why the spec changed (kept with the new revision).")] = "",
    replace_tasks: Annotated[bool, typer.Option(
        "--replace-tasks", help="Record a changed spec even where a task's index would name other "
                                "parameters or tasks would be dropped (refused without it, saying what "
                                "happens to each).")] = False,
    json_out: JsonOption = False,
) -> None:
    """Submit a campaign spec as Slurm job arrays (exactly once; re-running is safe). Submitting
    a changed spec of an existing campaign records a new revision (see `campaignctl revisions`);
    tasks it adds after the last are submitted at once.

    Example: campaignctl submit templates/sweep.yaml --dry-run
    """
    from campaignctl.services.submit import submit as submit_service

    result = submit_service(spec, dry_run=dry_run, reason=reason, replace_tasks=replace_tasks)
    if json_out:
        print_json("submit", result.to_dict())
    else:
        render(result)


ARGV_SHOWN = 10  # tasks whose command a dry run prints; --json has them all


def render(result: SubmitResult) -> None:
    name = (result.campaign, "bold")
    headline = {
        "created": styled("campaign ", name, f" created: {result.tasks} tasks"),
        "unchanged": styled("campaign ", name, f" exists, spec unchanged (revision {result.revision})"),
        "revised": styled("campaign ", name, ": spec changed"),
        "dry-run": styled("dry run for ", name, f": {result.tasks} tasks, MaxArraySize {result.max_array_size}"),
    }[result.outcome]
    console.print(headline)
    if result.chunks:
        table = Table("array", "tasks", "job id", "token", "action")
        for c in result.chunks:
            table.add_row(c.array_spec, f"{c.first_task}-{c.last_task}", c.job_id or "-", c.token or "-", c.action)
        console.print(table)
    elif result.outcome == "unchanged":
        console.print("nothing to submit: every task already has a job")
    for note in result.notes:
        console.print(f"note: {note}")
    if result.setup:
        console.print("setup lines (bash, run in the job before the program on every attempt):")
        for number, line in enumerate(result.setup, 1):
            console.print(f"  {number}  {line}", markup=False, highlight=False, soft_wrap=True)
    if result.argv:
        console.print("each task's command, as its first attempt runs it (no shell: one quoted word per argument):")
        for index, argv in list(result.argv.items())[:ARGV_SHOWN]:
            console.print(f"  {index}: {shlex.join(argv)}", markup=False, highlight=False, soft_wrap=True)
        if len(result.argv) > ARGV_SHOWN:
            console.print(f"  … and {len(result.argv) - ARGV_SHOWN} more (--json lists every task's)")
    if result.script:
        console.print("generated submission script (first array):")
        console.print(result.script, soft_wrap=True)
    if result.outcome != "dry-run" and result.sbatch_calls:
        console.print(f"{result.sbatch_calls} sbatch call(s). Watch it: campaignctl status {result.campaign}")
