"""Redraw a view every few seconds until Ctrl-C (`status --watch`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from datetime import datetime

import typer
from rich.console import Group, RenderableType
from rich.live import Live

from campaignctl.cli.common import console, styled

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


class _Frames:
    """The latest view with a footer. (A Slurm that does not answer is `status`'s to show: the
    stored state, marked stale.)"""

    def __init__(self, build: Callable[[], RenderableType], interval: float) -> None:
        self.build, self.interval = build, interval

    def next(self) -> RenderableType:
        stamp = datetime.now().astimezone().strftime("%H:%M:%S %Z")  # local, and which zone
        return Group(self.build(), styled((f"updated {stamp}, every {self.interval:g}s; Ctrl-C to stop", "dim")))


def _pause(stop: threading.Event, seconds: float) -> bool:
    """Wait between redraws; True once Ctrl-C asked to stop."""
    return stop.wait(seconds)


def watch(build: Callable[[], RenderableType], interval: float) -> None:
    """Show `build()` and redraw it every `interval` seconds. Ctrl-C leaves the last view on screen
    and exits 130; any other error ends the watch through the usual error boundary.

    The first Ctrl-C only sets a flag the loop checks (a KeyboardInterrupt raised wherever the
    main thread happens to be, in rich's or a library's cleanup, was seen lost under load: the
    watch went on redrawing); the redraw under way finishes and the watch ends. A second Ctrl-C
    interrupts at once."""
    frames = _Frames(build, interval)
    stop = threading.Event()

    def first_ctrl_c(_signum: int, _frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first_ctrl_c)
    try:
        with Live(frames.next(), console=console, auto_refresh=False) as live:
            while not _pause(stop, interval):
                live.update(frames.next(), refresh=True)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
    raise typer.Exit(INTERRUPTED)
