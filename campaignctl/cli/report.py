from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from campaignctl.cli.common import JsonOption, console, print_json, styled

if TYPE_CHECKING:
    from campaignctl.services.report import ReportResult


def report(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", help="Directory for index.html and the PNGs (created if missing).",
                                      show_default=False)],
    metric: Annotated[str | None, typer.Option("--metric", help="Training metric to draw (default: the one the "
                                               "rungs promote by, else the first reported).")] = None,
    json_out: JsonOption = False,
) -> None:
    """Write a self-contained HTML report (index.html, no external URL) and its charts as PNGs: tasks
    over time, GPU/CPU utilisation, spend vs budget, metric curves per rung, decisions on a timeline.
    Reads the store and the run directory only (no Slurm call).

    Example: campaignctl report lr-sweep --out reports/lr-sweep
    """
    from campaignctl.services.report import report as report_service

    result = report_service(campaign, out, metric)
    if json_out:
        print_json("report", result.to_dict())
    else:
        render(result)


def render(result: ReportResult) -> None:
    console.print(styled("report of ", (result.campaign, "bold"), f": {result.page}"), soft_wrap=True)
    for path in result.files[1:]:
        console.print(f"  {path}", soft_wrap=True)
    for chart, note in result.charts.items():
        if note:
            console.print(f"  {chart}: {note}", soft_wrap=True)
