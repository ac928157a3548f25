"""`log verify` and `log export`: the decision log's hash chain, checked and written out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from campaignctl.cli.common import JsonOption, console, print_json
from campaignctl.core.base.errors import IntegrityError

if TYPE_CHECKING:
    from campaignctl.services.chain import VerifyResult

def verify(
    campaign: Annotated[str | None, typer.Argument(
        help="Also count this campaign's decisions. The chain is one for all campaigns, so every "
             "row is always verified: a break anywhere is reported.", show_default=False)] = None,
    head: Annotated[Path | None, typer.Option(
        "--head", dir_okay=False, show_default=False,
        help="A head file written earlier (reconcile writes one when CAMPAIGNCTL_CHAIN_HEAD is set): "
             "also catches rows removed from the end and a chain rewritten from scratch.")] = None,
    json_out: JsonOption = False,
) -> None:
    """Check the hash chains of decisions and outcomes; name the first row changed outside campaignctl.

    Exit 0: every row's hash recomputes and links to the row before it.

    Exit 65: the chain is broken or disagrees with --head; the first bad row is named (rows before it are intact).

    Without --head, rows cut off the end leave a valid, shorter chain and cannot be noticed.

    Example: campaignctl log verify --head ~/campaignctl-head.json
    """
    from campaignctl.services.chain import verify_log

    result = verify_log(campaign, head)
    broken = None if result.ok else IntegrityError(
        "the decision log does not verify: " + "; ".join(result.problems),
        "a row was changed outside campaignctl (the log is append-only); keep "
        "the database as it is for inspection and restore a backup to continue")
    if json_out:  # one document: what was checked, and the error
        print_json("log verify", result.to_dict(), ok=result.ok, error=broken)
        if broken is not None:
            raise typer.Exit(broken.exit_code)
    elif broken is not None:
        raise broken
    else:
        render_verified(result)


def render_verified(result: VerifyResult) -> None:
    for report in (result.decisions, result.outcomes):
        console.print(f"{report.chain}s: {report.rows} row(s) intact; head #{report.head.id} {report.head.row_hash}",
                      soft_wrap=True)
    if result.campaign is not None:
        console.print(f"{result.campaign}: {result.campaign_decisions} of these decisions")
    if result.head_file:
        console.print(f"matches the head file {result.head_file}")


def _known_format(value: str) -> str:
    from campaignctl.services.chain import EXPORT_FORMATS

    if value not in EXPORT_FORMATS:
        raise typer.BadParameter(f"{value!r} is not an export format; use one of: {', '.join(EXPORT_FORMATS)}")
    return value


def export(
    campaign: Annotated[str, typer.Argument(help="Campaign name.", show_default=False)],
    fmt: Annotated[str, typer.Option("--format", callback=_known_format,
                                     help="Output format: jsonl (one JSON object per line).")] = "jsonl",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", dir_okay=False, show_default=False,
        help="Write to FILE (mode 0600, replaced only once complete) instead of stdout.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="With --output: print a versioned JSON "
                                           "envelope summing up the export.")] = False,
) -> None:
    """Write a campaign's decisions as JSON lines, oldest first, with outcomes and hashes.

    Each line holds every column as stored, the outcome (or null), prev_hash and row_hash.

    So each row's hash can be recomputed from the export alone (its links point into the global chain).

    Example: campaignctl log export lr-sweep --output lr-sweep-decisions.jsonl
    """
    if json_out and output is None:
        raise typer.BadParameter("--json needs --output: without it stdout carries the JSON lines")
    from campaignctl.services.chain import export_log

    result = export_log(campaign, output, sys.stdout)  # `| head`: exit 141 (cli/boundary.py)
    if json_out:
        print_json("log export", {"format": fmt, "decisions": result.decisions, "output": result.output})
    elif output is not None:
        console.print(f"exported {result.decisions} decision(s) of {campaign} to {output}")
