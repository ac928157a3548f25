from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from campaignctl.cli.common import JsonOption, console, print_json, styled

if TYPE_CHECKING:
    from campaignctl.core.status import TaskRow
    from campaignctl.services.status import SpendView, StatusResult

STATE_STYLE = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow", "FAILED": "red",
               "TIMEOUT": "red", "OUT_OF_MEMORY": "red", "NODE_FAIL": "red", "UNKNOWN": "magenta"}


def status(
    campaign: Annotated[str | None, typer.Argument(help="Campaign name; omit for all campaigns.")] = None,
    watch: Annotated[bool, typer.Option("--watch", help="Redraw every --interval seconds until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.5, help="Seconds between redraws.")] = 5.0,
    json_out: JsonOption = False,
) -> None:
    """Show campaigns, or one campaign's tasks, from one sacct call (one per redraw with --watch).

    Example: campaignctl status lr-sweep --watch --interval 10
    """
    if watch and json_out:
        raise typer.BadParameter("--watch redraws a table for people; for scripts, run --json in a loop")
    from campaignctl.services.status import status as status_service

    if watch:
        from campaignctl.cli import live

        live.watch(lambda: view(status_service(campaign), campaign), interval)
        return
    result = status_service(campaign)
    if json_out:
        print_json("status", result.to_dict())
    else:
        console.print(view(result, campaign))


def view(result: StatusResult, campaign: str | None) -> RenderableType:
    return campaigns_view(result) if campaign is None else tasks_view(result)


def _counts(counts: dict[str, int]) -> Text:
    return Text(", ").join(styled((k, STATE_STYLE.get(k, "white")), f" {v}") for k, v in counts.items())


def campaigns_view(result: StatusResult) -> RenderableType:
    if not result.campaigns:
        return "no campaigns yet: campaignctl submit SPEC"
    table = Table("campaign", "state", "revision", "tasks", "attempts", "task states", "decisions")
    for c in result.campaigns:
        table.add_row(c.name, c.state, str(c.revision), str(c.tasks), str(c.attempts), _counts(c.counts),
                      ", ".join(f"{k} {v}" for k, v in sorted(c.decisions.items())) or "-")
    return Group(table, *skipped_view(result.skipped_lines, result.skipped), *stall_view(result))


def stall_view(result: StatusResult) -> list[RenderableType]:
    """A stalled control loop in red, submissions Slurm refused in yellow, as plain text (they
    quote Slurm)."""
    refused: list[RenderableType] = [Text(f"{c.name}: {note}", style="yellow")
                                     for c in result.campaigns for note in c.refused]
    if result.ticks is None or not result.ticks.stalled:
        return refused
    return [*refused, Text(result.ticks.message, style="bold red")]


def skipped_view(count: int, notes: list[str]) -> list[RenderableType]:
    """`N line(s) of Slurm output skipped` and the first few, as plain text (no markup: they are
    Slurm's bytes)."""
    if not count:
        return []
    head = Text(f"{count} line(s) of Slurm output could not be read and were skipped:", style="yellow")
    return [head, *(Text(f"  {note}") for note in notes)]


def _usage(row: TaskRow) -> str:
    """Mean CPU (% of one core), peak RSS and mean GPU utilisation of the latest sampled attempt."""
    if row.cpu_mean_pct is None:
        return "-"
    gpu = "-" if row.gpu_util_mean_pct is None else f"{row.gpu_util_mean_pct:.0f}%"
    return f"{row.cpu_mean_pct:.0f}% / {row.rss_max_mb or 0:.0f}M / {gpu}"


FLAG_TEXT = {"data_starved": ("data-starved", "yellow"), "gpu_idle": ("GPU idle", "red")}


def tasks_view(result: StatusResult) -> RenderableType:
    summary = result.campaigns[0]
    table = Table("task", "params", "state", "attempts", "job id", "node", "elapsed", "exit", "cpu / rss / gpu",
                  "recent use", "last decision",
                  title=f"{summary.name} (revision {summary.revision}, {summary.state})")
    for row in result.tasks:
        style = STATE_STYLE.get(row.state, "white")
        flag = FLAG_TEXT.get(row.flag)
        use = styled(row.spark, " " if row.spark and flag else "", flag or "") if row.spark or flag else "-"
        table.add_row(str(row.index), " ".join(f"{k}={v}" for k, v in row.params.items()), styled((row.state, style)),
                      str(row.attempts), row.job_id or "-", row.node or "-",
                      "-" if row.elapsed_s is None else f"{row.elapsed_s}s",
                      "-" if row.exit_code is None else str(row.exit_code), _usage(row), use,
                      row.last_decision or "-")
    parts: list[RenderableType] = [table, summary.summary]
    if result.spend is not None:
        parts.append(spend_text(result.spend))
    return Group(*parts, *skipped_view(result.skipped_lines, result.skipped), *stall_view(result))


def spend_text(spend: SpendView) -> Text:
    """`gpu_hours: 1.2 spent + 0.5 committed + 3 projected of 10 (17% used)`, one line per dimension."""
    limits = spend.limits
    lines: list[Text] = []
    for dim in ("gpu_hours", "cpu_hours", "money"):
        spent, committed, projected = spend.spent[dim], spend.committed[dim], spend.projected[dim]
        if not (spent or committed or projected or dim in limits):
            continue
        text = Text(f"{dim}: {spent:.3g} spent + {committed:.3g} committed + {projected:.3g} projected")
        if dim in limits:
            limit = limits[dim]
            used = (spent + committed) / limit if limit else 1.0
            color = "red" if used >= 1 else "yellow" if used >= 0.8 else "green"
            text.append_text(styled(" of ", (f"{limit:g}", "bold"), " (", (f"{used:.0%} used", color), ")"))
        lines.append(text)
    if not limits:
        lines.append(Text("no budget set (spec key budget)"))
    elif spend.exhausted:
        lines.append(styled(("budget reached: pending work held", "red"),
                            " — raise it, submit the spec, `campaignctl resume`"))
    return Text("spend  ").append_text(Text("\n       ").join(lines))
