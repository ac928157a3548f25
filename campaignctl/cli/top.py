"""`top`: a live terminal view of every campaign, or of one (cli/top_app.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from campaignctl.cli.common import console

if TYPE_CHECKING:
    from campaignctl.cli.top_app import Actions


def top(
    campaign: Annotated[str | None, typer.Argument(help="Campaign name; omit for every campaign "
                                                   "(Enter opens one).")] = None,
    interval: Annotated[float, typer.Option("--interval", min=1.0, help="Seconds between redraws.")] = 5.0,
) -> None:
    """A live view read from the store (no Slurm call: the ticks stay with cron): tasks and their
    states, what holds work back (limits, budget, holds, refusals), the last decisions and their
    reasons, the objective's best so far, the ledger's bad nodes. Keys: arrows to move, Enter to
    open a campaign, o a task's output, c cancel and r retry a task (each asks first; the same
    checks and log entries as `cancel` and `retry`), g redraw now, Escape back, q or Ctrl-C quit.

    Example: campaignctl top lr-sweep
    """
    if not console.is_terminal:
        raise typer.BadParameter("top draws on a terminal; for scripts, `campaignctl status --json`")
    from campaignctl.cli.top_app import TopApp

    TopApp(campaign, store_actions(), interval).run()


def store_actions() -> Actions:
    """The keys' actions through the commands' own services."""
    from campaignctl.cli.top_app import OUTPUT_LINES
    from campaignctl.cli.top_app import Actions as TopActions
    from campaignctl.services import by_hand
    from campaignctl.services.output import first_offset, locate, masked, read_text
    from campaignctl.services.top import top_view

    def output(name: str, task: int) -> str:
        target = locate(name, task)
        head = f"attempt {target.attempt} of {target.attempts} ({target.state}): {target.path}\n"
        return head + "".join(masked(read_text(target, first_offset(target, OUTPUT_LINES))))

    def done(result: by_hand.ByHandResult) -> str:
        acted = [f"task {d['task']}: {d['action']} {d['status']}" for d in result.decisions]
        skipped = [f"task {s['task']}: {s['why']}" for s in result.skipped]
        return "; ".join(acted + skipped) or f"nothing to {result.action}"

    return TopActions(load=top_view, output=output,
                   cancel=lambda name, task: done(by_hand.cancel(name, [task], reason="from campaignctl top")),
                   retry=lambda name, task: done(by_hand.retry(name, [task], reason="from campaignctl top")))
