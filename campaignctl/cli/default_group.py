"""A typer group that runs a default subcommand when the first word names none of its own, so
`campaignctl log NAME` (the command before `log` had subcommands) still means `log show NAME`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.core import TyperGroup

if TYPE_CHECKING:  # recent typer vendors click as typer._click; only the annotation needs it
    from typer._click import Context


class DefaultGroup(TyperGroup):
    default_command = "show"

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        # `log --help` is the group's help; `log`, `log NAME`, `log --task 3 NAME` are `show`'s.
        # A campaign named like a subcommand is reached as `log show verify`.
        asks_help = bool(args) and args[0] in ctx.help_option_names
        if not asks_help and (not args or args[0] not in self.commands):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)
