"""`status`: every campaign, or one campaign's tasks, with the control loop's health on top."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from campaignctl.cli.common import JsonOption, console, local_time, plain_table, print_json, styled, whole_rows
from campaignctl.cli.status_table import STATE_STYLE, Shown, columns_for, task_table
from campaignctl.core.base.clock import brief
from campaignctl.core.screens.stall import NO_CRON, loop_warnings
from campaignctl.core.screens.status import (
    TASK_STATES,
    collapse,
    index_ranges,
    param_digits,
    unknown_states,
    varying_keys,
)

if TYPE_CHECKING:
    from campaignctl.services.status import SpendView, StatusResult

LIVE_STATES = ("active", "paused", "cancelling")  # campaigns the control loop still works on
PAGE = 100  # task rows a table shows unless --limit says otherwise: a screen, not 100,000 lines


def status(
    campaign: Annotated[str | None, typer.Argument(help="Campaign name; omit for all campaigns.")] = None,
    wide: Annotated[bool, typer.Option("--wide", help="Every column: job id, node, usage, shadow "
                                       "proposals, attempt token; all parameters.")] = False,
    state: Annotated[list[str] | None, typer.Option("--state", help="Only tasks in this state "
                                                   "(repeatable), e.g. --state FAILED.")] = None,
    task: Annotated[list[int] | None, typer.Option("--task", help="Only this task (repeatable).")] = None,
    watch: Annotated[bool, typer.Option("--watch", help="Redraw every --interval seconds until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.5, help="Seconds between redraws.")] = 5.0,
    limit: Annotated[int | None, typer.Option("--limit", min=0, help=f"Task rows shown (default {PAGE} in the "
                                              "table, every row with --json; 0: all).")] = None,
    json_out: JsonOption = False,
) -> None:
    """Show campaigns, or one campaign's tasks, from one sacct call (one per redraw with --watch).
    Fits the terminal; --wide shows every column, and a pipe or file gets whole rows (no width
    limit). With Slurm unreachable, the stored state, marked stale.

    A campaign's table shows its first rows (--limit); the counts above it are of every task.

    Example: campaignctl status lr-sweep --state FAILED --watch --interval 10
    """
    if watch and json_out:
        raise typer.BadParameter("--watch redraws a table for people; for scripts, run --json in a loop")
    if campaign is None and (state or task):
        raise typer.BadParameter("--state and --task pick tasks of one campaign: name it")
    if unknown := unknown_states(state or ()):
        raise typer.BadParameter(f"{unknown[0]!r} is no task state; the states are {', '.join(TASK_STATES)}",
                                 param_hint="--state")
    from campaignctl.services.status import status as status_service

    rows = limit if limit is not None else None if json_out else PAGE

    def build() -> StatusResult:
        return status_service(campaign, state or (), task or (), limit=rows, campaign_figures=json_out)

    if watch:
        from campaignctl.cli import live

        live.watch(lambda: view(build(), campaign, wide, bool(state)), interval)
        return
    result = build()
    if json_out:
        print_json("status", result.to_dict())
        return
    with whole_rows(wide):
        console.print(view(result, campaign, wide, bool(state)))


def view(result: StatusResult, campaign: str | None, wide: bool = False, by_state: bool = False) -> RenderableType:
    return campaigns_view(result, wide) if campaign is None else tasks_view(result, wide, by_state)


def _counts(counts: dict[str, int]) -> Text:
    return Text(", ").join(styled((k, STATE_STYLE.get(k, "white")), f" {v}") for k, v in counts.items())


def campaigns_view(result: StatusResult, wide: bool = False) -> RenderableType:
    """One line per campaign at 80 columns: its name whole (what one types next), then the
    figures; the task states wrap last. Decisions by action with --wide (their count without)."""
    if not result.campaigns:
        return "no campaigns yet: campaignctl submit SPEC"
    longest = max(len(c.name) for c in result.campaigns)
    table = plain_table()
    table.add_column("campaign", no_wrap=True, min_width=max(len("campaign"), longest))
    for name in ("state", "rev", "tasks", "tries", "decided"):
        table.add_column(name, no_wrap=True, justify="left" if name == "state" else "right")
    table.add_column("task states", ratio=1)
    if wide:
        table.add_column("decisions")
    for c in result.campaigns:
        decided = ", ".join(f"{k} {v}" for k, v in sorted(c.decisions.items())) or "-"
        table.add_row(c.name, c.state, str(c.revision), str(c.tasks), str(c.attempts),
                      str(sum(c.decisions.values())), _counts(c.counts), *([decided] if wide else []))
    return Group(*loop_view(result, Text("campaigns")), table, *skipped_view(result.skipped_lines, result.skipped))


def loop_view(result: StatusResult, title: Text) -> list[RenderableType]:
    """`NAME: revision 2, active · last tick 3m ago, cron every 5m`, then in colour: stale data,
    a stalled loop, no tick for too long, no crontab line, a tick that failed on a campaign,
    submissions Slurm refused."""
    ticks = result.ticks
    if ticks is not None:
        age = "no tick yet" if ticks.last_tick_age_s is None else f"last tick {brief(ticks.last_tick_age_s)} ago"
        every = f", cron every {brief(ticks.interval_s)}" if ticks.interval_s else ""
        title.append(f" · {age}{every}", style="dim")
    lines: list[RenderableType] = [title]
    if result.stale:
        when = local_time(ticks.last_tick_at) + " (last tick)" if ticks and ticks.last_tick_at else "submit"
        lines.append(Text(f"stale: Slurm unreachable ({result.stale}), showing state from {when}",
                          style="bold yellow"))
    if ticks is not None and ticks.stalled:
        lines.append(Text(ticks.message, style="bold red"))
    if ticks is not None and any(c.state in LIVE_STATES for c in result.campaigns):
        cron = result.cron
        from campaignctl.services.ticks import due_warning

        warnings = loop_warnings(ticks, cron is None or cron.installed, cron.problem if cron else "")
        lines += [Text(w, style="yellow") for w in warnings
                  if not w.startswith(NO_CRON) or due_warning("no-cron")]  # once a minute, not every screen
    lines += [Text(f"{c.name}: {c.tick_failed}", style="bold red") for c in result.campaigns if c.tick_failed]
    lines += [Text(f"{c.name}: {note}", style="yellow") for c in result.campaigns for note in c.refused]
    lines += [Text(f"{c.name}: {note}", style="yellow") for c in result.campaigns for note in c.node_ledger]
    lines += [Text(f"{result.campaigns[0].name}: {note}", style="yellow") for note in result.silent + result.unmatched]
    return lines


def skipped_view(count: int, notes: list[str]) -> list[RenderableType]:
    """`N line(s) of Slurm output skipped` and the first few, as plain text (no markup: they are
    Slurm's bytes)."""
    if not count:
        return []
    head = Text(f"{count} line(s) of Slurm output could not be read and were skipped:", style="yellow")
    return [head, *(Text(f"  {note}") for note in notes)]


def tasks_view(result: StatusResult, wide: bool = False, by_state: bool = False) -> RenderableType:
    """Header and summary first (a --watch taller than the terminal cuts the bottom), then one
    line per task; NOT_SUBMITTED / NOT_PROMOTED tasks as one line per state unless asked for."""
    summary = result.campaigns[0]
    title = styled((summary.name, "bold"), f": revision {summary.revision}, {summary.state}")
    parts: list[RenderableType] = [*loop_view(result, title), Text(summary.summary)]
    if result.spend is not None:
        parts.append(spend_text(result.spend))
    rows, quiet = (list(result.tasks), {}) if by_state else collapse(result.tasks)
    shown = Shown(None if wide else varying_keys(result.tasks), param_digits(row.params for row in result.tasks))
    if rows:
        parts.append(task_table(rows, columns_for(rows, wide, shown, console.width), shown))
    elif not quiet:
        parts.append(Text("no task matches"))
    if result.rows_matched > len(rows):
        parts.append(Text(f"the first {len(rows)} of {result.rows_matched:,} tasks: --limit 0 shows every "
                          "one, --state or --task picks", style="dim"))
    parts += [Text(f"{state}: {len(tasks)} task(s) ({index_ranges(tasks)})", style="dim")
              for state, tasks in quiet.items()]
    return Group(*parts, *skipped_view(result.skipped_lines, result.skipped))


def spend_text(spend: SpendView) -> Text:
    """`gpu_hours: 1.2 spent + 0.5 committed + 3 projected of 10 (17% used)`, one line per dimension;
    energy says what measured it: `energy_kwh: 0.55 spent (gpu) + …` (node: sacct, gpu: NVML)."""
    limits = spend.limits
    lines: list[Text] = []
    for dim in ("gpu_hours", "cpu_hours", "money", "energy_kwh"):
        spent, committed, projected = spend.spent[dim], spend.committed[dim], spend.projected[dim]
        if not (spent or committed or projected or dim in limits):
            continue
        source = f" ({spend.energy_source})" if dim == "energy_kwh" and spend.energy_source else ""
        text = Text(f"{dim}: {spent:.3g} spent{source} + {committed:.3g} committed + {projected:.3g} projected")
        if dim in limits:
            limit = limits[dim]
            used = (spent + committed) / limit if limit else 1.0
            color = "red" if used >= 1 else "yellow" if used >= 0.8 else "green"
            text.append_text(styled(" of ", (f"{limit:g}", "bold"), " (", (f"{used:.0%} used", color), ")"))
        lines.append(text)
    for cluster, spent_there in spend.by_cluster.items():
        figures = ", ".join(f"{v:.3g} {dim}" for dim, v in spent_there.items() if v)
        lines.append(Text(f"{cluster}: {figures or 'nothing'} spent", style="dim"))
    if not limits:
        lines.append(Text("no budget set (spec key budget)"))
    elif spend.exhausted:
        lines.append(styled(("budget reached: pending work held", "red"),
                            " — raise it, submit the spec, `campaignctl resume`"))
    return Text("spend  ").append_text(Text("\n       ").join(lines))
