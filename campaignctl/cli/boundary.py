"""The one error boundary of the command line. Every way a command ends becomes one exit code and
one report: `error:`/`hint:` on stderr, or under `--json` an error envelope on stdout (where a
script reads the success envelope); a reader that went away (`| head`) is exit 141, quietly."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from typer.core import TyperGroup

from campaignctl.cli.common import JSON_SCHEMA, err_console, error_body, styled
from campaignctl.core.base.errors import CampaignctlError, InternalError, UsageError

if TYPE_CHECKING:  # recent typer vendors click as typer._click; only the annotation needs it
    from typer._click import Context

BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for any tool whose reader went away


class BoundaryGroup(TyperGroup):
    """The root command: runs the subcommand inside the boundary. (click itself turns a broken
    pipe into exit 1 and prints usage errors only as text, so both are caught before it sees them.)"""

    def make_context(self, info_name: str | None, args: list[str], parent: Context | None = None,
                     **extra: Any) -> Context:
        try:  # `campaignctl --help` and `--version` print while the arguments are parsed
            return super().make_context(info_name, args, parent, **extra)
        except BrokenPipeError:
            exit_broken_pipe()

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        ctx.meta["campaignctl.args"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Context) -> Any:
        args: list[str] = ctx.meta.get("campaignctl.args", [])
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at exit
            return result
        except BrokenPipeError:
            exit_broken_pipe()
        except (typer.Exit, typer.Abort):
            raise
        except typer.TyperException as exc:  # a usage error: typer prints it, unless --json
            if not wants_json(args):
                raise
            command = " ".join(["campaignctl", *command_words(self, args)])
            fail(UsageError(exc.format_message(), f"see `{command} --help`"), self, args)
        except CampaignctlError as exc:
            fail(exc, self, args)
        except Exception as exc:  # a bug: no traceback unless asked for
            if os.environ.get("CAMPAIGNCTL_DEBUG"):
                raise
            fail(InternalError(f"internal error: {type(exc).__name__}: {exc}",
                               "rerun with CAMPAIGNCTL_DEBUG=1 for a traceback and report it"), self, args)


def fail(exc: CampaignctlError, root: TyperGroup, args: Sequence[str]) -> NoReturn:
    try:
        if wants_json(args):
            envelope = {"schema": JSON_SCHEMA, "command": " ".join(command_words(root, args)), "ok": False,
                        "error": error_body(exc)}
            typer.echo(json.dumps(envelope, indent=2))
            sys.stdout.flush()
        else:
            err_console.print(styled(("error:", "bold red"), f" {exc.message}"), soft_wrap=True)
            if exc.hint:
                err_console.print(styled(("hint:", "bold"), f" {exc.hint}"), soft_wrap=True)
    except BrokenPipeError:
        exit_broken_pipe()
    sys.exit(exc.exit_code)


def wants_json(args: Sequence[str]) -> bool:
    """`--json` among the arguments (before a `--`, after which words are values)."""
    return "--json" in (args[:args.index("--")] if "--" in args else args)


def command_words(root: TyperGroup, args: Sequence[str]) -> list[str]:
    """The command the arguments name (`log export`): the leading words that are subcommands."""
    words: list[str] = []
    group: Any = root
    for word in args:
        group = getattr(group, "commands", {}).get(word)
        if group is None:
            break
        words.append(word)
    return words


def flush_stdout() -> None:
    """Flush stdout now; a reader that went away ends the process with exit 141."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        exit_broken_pipe()


def exit_broken_pipe() -> NoReturn:
    # `campaignctl log NAME | head -c 10`: the reader has what it wanted. stdout now points at
    # /dev/null, so the interpreter's own flush at exit has nothing to fail on (it would print
    # "Exception ignored … BrokenPipeError" and exit 120).
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(BROKEN_PIPE_EXIT)
