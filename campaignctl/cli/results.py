from __future__ import annotations

import csv
import sys
from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from campaignctl.cli.common import JsonOption, console, plain_table, print_json, styled, whole_rows
from campaignctl.core.screens.results import ConfigResult, param_column
from campaignctl.core.screens.status import param_digits, param_text, shown_value
from campaignctl.core.usage.efficiency import COLUMNS, cells, efficiency_text

if TYPE_CHECKING:
    from campaignctl.services.results import ResultsResult


class By(str, Enum):
    last = "last"
    best = "best"


class Goal(str, Enum):
    min = "min"
    max = "max"


PAGE = 100  # configs a table shows unless --top says otherwise: a screen, not 100,000 lines


def results(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    metric: Annotated[str | None, typer.Option(
        "--metric", help="Metric to rank by (default: the spec's objective, what its rungs promote by or early "
                         "stopping watches; else the only metric reported).")] = None,
    by: Annotated[By, typer.Option("--by", help="Rank by each config's last value or its best one.")] = By.last,
    goal: Annotated[Goal | None, typer.Option("--goal", show_default=False,
                                              help="min: lower is better (default: the objective's).")] = None,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print the rows as CSV (a header, then one line per "
                                                         "config).")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="Add the efficiency columns: cpu, mem, time, gpu, "
                                                      "gpu mem (% of what Slurm allocated), kWh, and "
                                                      "bound (compute, io, communication, memory, idle).")] = False,
    top: Annotated[int | None, typer.Option("--top", min=0, help=f"The first N configs of the ranking (default "
                                            f"{PAGE} in the table, every one with --csv or --json; 0: all).")] = None,
    json_out: JsonOption = False,
) -> None:
    """One row per config, the winner first: its params, the rung it reached, its state, its final
    and best value of the metric, and what it used (cpu, mem, time, gpu: % of what Slurm
    allocated; GPU-hours, cost). Reads the store only (states as of the last reconcile tick).

    A table shows the top of the ranking (--top); the campaign's figures below it are of every config.

    Example: campaignctl results lr-sweep --metric val_loss --by best --csv > results.csv
    """
    if csv_out and json_out:
        raise typer.BadParameter("--csv or --json, not both")
    from campaignctl.services.results import results as results_service

    result = results_service(campaign, metric, by.value, goal.value if goal else None)
    shown = top if top is not None else None if json_out or csv_out else PAGE
    ranked = len(result.configs)
    if shown:
        result = replace(result, configs=result.configs[:shown])
    if json_out:
        print_json("results", result.to_dict())
    elif csv_out:
        write_csv(result.rows())
    else:
        with whole_rows(wide):
            console.print(view(result, wide))
        if ranked > len(result.configs):
            console.print(Text(f"the top {len(result.configs)} of {ranked:,} configs: --top 0 shows every one",
                               style="dim"))


def write_csv(rows: list[dict[str, object]]) -> None:
    """Every row's keys, in first-seen order, as the header; unknown figures as empty cells."""
    header = list(dict.fromkeys(key for row in rows for key in row))
    writer = csv.DictWriter(sys.stdout, header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


SHORT = ("GPU-h", "cost")  # what fits 80 columns next to the params and the metric; --wide adds the rest


def view(result: ResultsResult, wide: bool = False) -> RenderableType:
    params = list(dict.fromkeys(k for c in result.configs for k in c.params))
    rungs = any(c.rung for c in result.configs)
    unused = _unused_columns(result)
    shown = [i for i, name in enumerate(COLUMNS) if (wide or name in SHORT) and name not in unused]
    # the config and its params never cut (issue 28: lr printed as `0.…`); the figures are short
    packed = wide and any(c.shared for c in result.configs)  # `12_0 ×4`: ran packed, sharing that job
    placed = any(c.cluster for c in result.configs)  # `clusters:`: where each config's latest attempt is
    table = plain_table("rank", "config", *map(param_column, params), *(["rung"] if rungs else []), "state",
                        *(["cluster"] if placed else []),
                        "final", "best", *(COLUMNS[i] for i in shown), *(["shared"] if packed else []),
                        title=f"{result.campaign}: {result.metric or 'no metric reported yet'}")
    digits = param_digits(c.params for c in result.configs)
    for c in result.configs:
        figures = cells(c.efficiency)
        table.add_row("-" if c.rank is None else str(c.rank), str(c.config),
                      *(shown_value(c.params.get(k, ""), digits.get(k, 4)) for k in params),
                      *([c.rung] if rungs else []), c.state, *([c.cluster or "-"] if placed else []),
                      _value(c.final), _value(c.best), *(figures[i] for i in shown),
                      *([c.shared or "-"] if packed else []))
    return Group(table, _summary(result), Text(f"campaign: {efficiency_text(result.efficiency)} "
                                               "(cpu, mem, time, gpu: % of what Slurm allocated)"),
                 *(Text(w, style="yellow") for w in result.warnings))


def _unused_columns(result: ResultsResult) -> set[str]:
    """Columns every config has nothing in: a CPU campaign's GPU columns, cost without prices."""
    effs = [c.efficiency for c in result.configs]
    unused = set()
    if not any(e.gpu_hours for e in effs):
        unused |= {"gpu", "gpu mem", "GPU-h"}
    if not any(e.cost for e in effs):
        unused.add("cost")
    return unused


def _summary(result: ResultsResult) -> Text:
    if result.metric is None:
        return Text("no task reported a metric yet (tasks call campaignctl.report(step=…, name=value))")
    ranked = f"ranked by {'the best' if result.by == 'best' else 'the last'} {result.metric}, {result.goal} " \
             f"({result.goal_source})"
    winner = next((c for c in result.configs if c.rank == 1), None)
    if winner is None:
        return Text(f"{ranked}; no config reported {result.metric} yet")
    return styled(f"{ranked}; winner: ", (_describe(winner), "bold"))


def _describe(c: ConfigResult) -> str:
    params = param_text(c.params)
    return f"config {c.config} ({params})" if params else f"config {c.config}"
