"""How parameters read in `--help`: `--diff REV`, a flag bare, `revisions [OPTIONS] CAMPAIGN`.

typer (0.2x) writes each parameter's Python type instead (`--json <bool>`, `--reason <str>`,
`campaign <str>`) and wraps a required argument in braces (`revisions [OPTIONS] {campaign}`),
with no setting to turn that off; it builds its parameter objects itself, so a subclass cannot
be slipped in. `plain_parameters()` replaces those three methods once, at start-up."""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperOption

# typer's label (what it prints between < >) → the word for people; other labels are upper-cased
WORDS = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "int range": "INTEGER", "float range": "NUMBER"}


def _option_value(self: TyperOption, ctx: Any) -> str | None:
    """A flag takes no value: nothing. Otherwise its metavar, or a word for its type."""
    if self.is_flag or self.count:
        return None
    if self.metavar is not None:
        return str(self.metavar)
    label = self.display_type(ctx).strip("<>")
    return WORDS.get(label, label.upper())


def _argument_type(self: TyperArgument, ctx: Any) -> str | None:
    return None  # an argument's name says what it is; its help says the rest


def _argument_usage(self: TyperArgument) -> str:
    name = self.display_name_raw.upper() + ("..." if self.nargs != 1 else "")
    return name if self.required else f"[{name}]"


def plain_parameters() -> None:
    TyperOption.display_type_rich = _option_value  # type: ignore[method-assign]
    TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign,assignment]
    TyperArgument._usage_display_name = _argument_usage  # type: ignore[method-assign]
