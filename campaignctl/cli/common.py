"""Shared CLI pieces: option aliases, the JSON envelope, the console."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, ConsoleDimensions
from rich.table import Table
from rich.text import Text

from campaignctl.core.base.clock import read_time
from campaignctl.core.base.errors import CampaignctlError

JSON_SCHEMA = "campaignctl/v1"

JsonOption = Annotated[bool, typer.Option("--json", help="Print a versioned JSON envelope instead of tables.")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Show what would happen; change nothing.")]


def _prom_file(path: Path | None) -> Path | None:
    if path is not None and path.suffix != ".prom":
        raise typer.BadParameter("node_exporter's textfile collector reads only files named *.prom")
    return path


TextfileOption = Annotated[Path | None, typer.Option(
    "--textfile", callback=_prom_file, show_default=False,
    help="Prometheus textfile (*.prom) for node_exporter: written as a temp file, mode 0644, then renamed.")]

UNLIMITED = 100_000  # columns of a console with no width limit (rich needs a number)


class _Console(Console):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if "width" not in options:
            # rich fixes the width from COLUMNS as it was when the console was made (this module's
            # import); read at each print instead, as `size` does with no width fixed
            self._width = None

    def on_broken_pipe(self) -> None:
        """rich would exit 1; the CLI's boundary makes a reader that went away exit 141."""
        self.quiet = True
        raise BrokenPipeError

    @property
    def size(self) -> ConsoleDimensions:
        """A terminal's size; written to a pipe or a file (and COLUMNS not set), no width limit:
        whole rows, as squeue, ps and kubectl print them for grep and paste. (rich would take the
        width of whichever standard stream is a terminal, stderr in `status | cat`, else 80.)"""
        dims = super().size
        if self._width is None and not self.is_terminal and not self._environ.get("COLUMNS"):
            return ConsoleDimensions(UNLIMITED, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


def plain_table(*whole: str, wrapping: tuple[str, ...] = (), **options: Any) -> Table:
    """A borderless table (80 columns fit more): the `whole` columns never cut or wrapped (names,
    states, the parameters that vary: what one types or greps next), then the `wrapping` ones,
    which wrap in what room is left."""
    table = Table(box=None, padding=(0, 1), collapse_padding=True, pad_edge=False, header_style="bold underline",
                  **options)
    for name in whole:
        table.add_column(name, no_wrap=True)
    for name in wrapping:
        table.add_column(name, ratio=1)
    return table


@contextmanager
def whole_rows(wide: bool) -> Iterator[None]:
    """`--wide`: whole rows whatever the terminal's width (the terminal wraps them)."""
    before = console._width
    if wide:
        console.width = UNLIMITED
    try:
        yield
    finally:
        console._width = before


# Markup is off on both consoles: user and Slurm text (a param `[/data/a]`, a reason, a hostlist
# `node[1-2]`, sbatch's refusal) prints as written; `[/]` in it used to raise MarkupError in the
# error boundary and `node[1-2]` printed as `node`. Style goes through `styled`, never `[bold]`.
console = _Console(highlight=False, markup=False)
err_console = _Console(stderr=True, highlight=False, markup=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """One line of literal text; `(text, style)` parts are styled, nothing is read as markup."""
    return Text.assemble(*parts)


def local_time(value: datetime | str) -> str:
    """A stored time (UTC) as people read it: this machine's local time (TZ), naming the zone
    (`2026-11-24 07:12:08 CET`). `--json` keeps the stored ISO 8601 UTC (`…T06:12:08+00:00`)."""
    moment = read_time(value) if isinstance(value, str) else value
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def error_body(exc: CampaignctlError) -> dict[str, object]:
    """The `error` of a `--json` envelope (README: exit codes)."""
    return {"code": exc.exit_code, "kind": exc.kind, "message": exc.message, "hint": exc.hint}


def print_json(command: str, data: Any, ok: bool = True, error: CampaignctlError | None = None) -> None:
    envelope = {"schema": JSON_SCHEMA, "command": command, "ok": ok, "data": data}
    if error is not None:
        envelope["error"] = error_body(error)
    typer.echo(json.dumps(envelope, indent=2, default=str))
