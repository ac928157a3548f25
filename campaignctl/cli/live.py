"""Redraw a view every few seconds until Ctrl-C (`status --watch`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from time import sleep

import typer
from rich.console import Group, RenderableType
from rich.live import Live

from campaignctl.cli.common import console, styled
from campaignctl.core.errors import SlurmTransientError

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


class _Frames:
    """The latest view with a footer; a transient Slurm error keeps the last good view and says so."""

    def __init__(self, build: Callable[[], RenderableType], interval: float) -> None:
        self.build, self.interval = build, interval
        self.last: RenderableType = ""

    def next(self) -> RenderableType:
        stamp = datetime.now().astimezone().strftime("%H:%M:%S %Z")  # local, and which zone
        try:
            self.last = self.build()
            note: str | tuple[str, str] = ""
        except SlurmTransientError as exc:  # the queue is busy: keep watching, try again next time
            note = (f"{stamp}: Slurm did not answer ({exc.message}); showing the last view\n", "yellow")
        return Group(self.last, styled(note, (f"updated {stamp}, every {self.interval:g}s; Ctrl-C to stop", "dim")))


def watch(build: Callable[[], RenderableType], interval: float) -> None:
    """Show `build()` and redraw it every `interval` seconds. Ctrl-C leaves the last view on screen
    and exits 130; any other error ends the watch through the usual error boundary."""
    frames = _Frames(build, interval)
    try:
        with Live(frames.next(), console=console, auto_refresh=False) as live:
            while True:
                sleep(interval)
                live.update(frames.next(), refresh=True)
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None
