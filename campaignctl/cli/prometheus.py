"""`campaignctl metrics`: the Prometheus export, printed or written for node_exporter's textfile collector."""

from __future__ import annotations

from typing import Annotated

import typer

from campaignctl.cli.common import JsonOption, TextfileOption, console, print_json


def metrics(
    campaign: Annotated[str | None, typer.Argument(help="Campaign name; omit for all campaigns.")] = None,
    textfile: TextfileOption = None,
    json_out: JsonOption = False,
) -> None:
    """Campaign metrics in the Prometheus text format (0.0.4) for node_exporter's textfile collector:
    tasks by state, attempts, spend and budget, decisions by rule and action, GPU/CPU use of running
    tasks, the last reconcile. Reads the store only (no Slurm call): run it after reconcile.

    Example: campaignctl metrics --textfile /var/lib/node_exporter/textfile/campaignctl.prom
    """
    from campaignctl.services.prometheus import export_metrics

    export = export_metrics(campaign, textfile)
    if json_out:
        print_json("metrics", export.to_dict())
    elif textfile is None:
        typer.echo(export.text, nl=False)
    else:
        console.print(f"{export.samples} samples of {len(export.campaigns)} campaign(s) written to {textfile}",
                      soft_wrap=True)
