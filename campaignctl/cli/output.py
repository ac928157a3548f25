"""`output NAME TASK`: what a task's program wrote (stdout and stderr), whole, its end, or followed."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Annotated

import typer

from campaignctl.cli.common import err_console

INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C while following


def output(
    campaign: Annotated[str, typer.Argument(help="Campaign name.")],
    task: Annotated[int, typer.Argument(help="Task index, as `status` shows it.")],
    attempt: Annotated[int | None, typer.Option("--attempt", min=1, help="Attempt number (1 = first); "
                                                "default: the latest.")] = None,
    follow_: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing what is appended until the "
                                          "attempt ends (waits for a pending one to start); Ctrl-C stops.")] = False,
    tail: Annotated[int | None, typer.Option("--tail", min=0, help="Start at the last N lines.")] = None,
    path_only: Annotated[bool, typer.Option("--path", help="Print only the file's path (for scripts).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No header line on stderr.")] = False,
) -> None:
    """Print the output (stdout and stderr) of a task's attempt: <run_dir>/tasks/TASK/<token>/output.log.
    A header line (task, attempt, state, path) goes to stderr first (--quiet: none); the output
    always ends with a newline, so a last line without one does not run into the next prompt.
    Slurm's own lines on how it ended the job (an oom-kill, DUE TO TIME LIMIT), from the job's log
    under <run_dir>/slurm, follow it, marked `[slurm]`. Secrets the program printed as assignments
    or options (DB_PASS=…, --password …, Bearer …) are shown as ***.

    Exit codes: 4 no such campaign, task or attempt (the ones that exist are named); 6 the attempt
    has no output yet (pending: -f waits for it); 130 Ctrl-C while following; 141 the reader closed
    the pipe.

    Example: campaignctl output lr-sweep 4 --tail 50 -f
    """
    from campaignctl.services.output import first_offset, follow, locate, masked, read_text

    target = locate(campaign, task, attempt)
    if path_only:
        typer.echo(target.path)
        return
    job = f", job {target.job_id}" if target.job_id else ""
    chunks = follow(target, tail) if follow_ else read_text(target, first_offset(target, tail))
    if not quiet:
        err_console.print(f"task {target.task} of {target.campaign!r}, attempt {target.attempt} of "
                          f"{target.attempts} ({target.state}{job}): {target.path}", style="dim", soft_wrap=True)
        err_console.file.flush()
    _write(masked(chunks))
    from campaignctl.services.output import slurm_endings

    for line in slurm_endings(target):  # after the program's last line, where Slurm ended it
        sys.stdout.write(f"[slurm] {line}\n")
    sys.stdout.flush()


def _write(chunks: Iterable[str]) -> None:
    last = "\n"
    try:
        for text in chunks:
            sys.stdout.write(text)
            sys.stdout.flush()  # a reader that went away (`| head`): exit 141 at the CLI's boundary
            last = text[-1:] or last
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None
    if last != "\n":  # a program killed mid-line (a traceback's last line, an OOM kill)
        sys.stdout.write("\n")
        sys.stdout.flush()
