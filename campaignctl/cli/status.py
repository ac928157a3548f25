from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from campaignctl.cli.common import JsonOption, console, print_json
from campaignctl.core.status import TaskRow
from campaignctl.services.status import SpendView, StatusResult
from campaignctl.services.status import status as status_service

STATE_STYLE = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow", "FAILED": "red",
               "TIMEOUT": "red", "OUT_OF_MEMORY": "red", "NODE_FAIL": "red", "UNKNOWN": "magenta"}


def status(
    campaign: Annotated[str | None, typer.Argument(help="Campaign name; omit for all campaigns.")] = None,
    json_out: JsonOption = False,
) -> None:
    """Show campaigns, or one campaign's tasks, from one sacct call.

    Example: campaignctl status lr-sweep --json
    """
    result = status_service(campaign)
    if json_out:
        print_json("status", result.to_dict())
    elif campaign is None:
        render_campaigns(result)
    else:
        render_tasks(result)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"[{STATE_STYLE.get(k, 'white')}]{k}[/] {v}" for k, v in counts.items())


def render_campaigns(result: StatusResult) -> None:
    if not result.campaigns:
        console.print("no campaigns yet: campaignctl submit SPEC")
        return
    table = Table("campaign", "state", "revision", "tasks", "attempts", "task states", "decisions")
    for c in result.campaigns:
        table.add_row(c.name, c.state, str(c.revision), str(c.tasks), str(c.attempts), _counts(c.counts),
                      ", ".join(f"{k} {v}" for k, v in sorted(c.decisions.items())) or "-")
    console.print(table)


def _usage(row: TaskRow) -> str:
    """Mean CPU (% of one core), peak RSS and mean GPU utilisation of the latest sampled attempt."""
    if row.cpu_mean_pct is None:
        return "-"
    gpu = "-" if row.gpu_util_mean_pct is None else f"{row.gpu_util_mean_pct:.0f}%"
    return f"{row.cpu_mean_pct:.0f}% / {row.rss_max_mb or 0:.0f}M / {gpu}"


FLAG_TEXT = {"data_starved": "[yellow]data-starved[/]", "gpu_idle": "[red]GPU idle[/]"}


def render_tasks(result: StatusResult) -> None:
    summary = result.campaigns[0]
    table = Table("task", "params", "state", "attempts", "job id", "node", "elapsed", "exit", "cpu / rss / gpu",
                  "recent use", "last decision",
                  title=f"{summary.name} (revision {summary.revision}, {summary.state})")
    for row in result.tasks:
        style = STATE_STYLE.get(row.state, "white")
        use = " ".join(x for x in (row.spark, FLAG_TEXT.get(row.flag, "")) if x) or "-"
        table.add_row(str(row.index), " ".join(f"{k}={v}" for k, v in row.params.items()), f"[{style}]{row.state}[/]",
                      str(row.attempts), row.job_id or "-", row.node or "-",
                      "-" if row.elapsed_s is None else f"{row.elapsed_s}s",
                      "-" if row.exit_code is None else str(row.exit_code), _usage(row), use,
                      row.last_decision or "-")
    console.print(table)
    console.print(summary.summary)
    if result.spend is not None:
        console.print(spend_text(result.spend))


def spend_text(spend: SpendView) -> str:
    """`gpu_hours: 1.2 spent + 0.5 committed + 3 projected of 10 (17% used)`, one line per dimension."""
    limits = spend.limits
    lines = []
    for dim in ("gpu_hours", "cpu_hours", "money"):
        spent, committed, projected = spend.spent[dim], spend.committed[dim], spend.projected[dim]
        if not (spent or committed or projected or dim in limits):
            continue
        text = f"{dim}: {spent:.3g} spent + {committed:.3g} committed + {projected:.3g} projected"
        if dim in limits:
            limit = limits[dim]
            used = (spent + committed) / limit if limit else 1.0
            color = "red" if used >= 1 else "yellow" if used >= 0.8 else "green"
            text += f" of [bold]{limit:g}[/] ([{color}]{used:.0%} used[/])"
        lines.append(text)
    if not limits:
        lines.append("no budget set (spec key budget)")
    elif spend.exhausted:
        lines.append("[red]budget reached: pending work held[/] — raise it, submit the spec, `campaignctl resume`")
    return "spend  " + "\n       ".join(lines)
