"""The one exception family. The CLI catches `CampaignctlError` once and maps `exit_code`."""

from __future__ import annotations


class CampaignctlError(Exception):
    """A user-facing error: `message` says what is wrong, `hint` what to do next."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class SpecError(CampaignctlError):
    """The campaign spec (or another input file) is invalid."""

    exit_code = 3

    def __init__(self, problems: list[str], source: str,
                 hint: str = "fix the keys above; the spec reference is in README.md#spec-reference") -> None:
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}", hint)
        self.problems = problems


class NotFoundError(CampaignctlError):
    """A named campaign (or other object) does not exist."""

    exit_code = 4


class SlurmUnavailableError(CampaignctlError):
    """A Slurm command is missing or failed for a non-transient reason (EX_UNAVAILABLE)."""

    exit_code = 69


class SlurmTransientError(CampaignctlError):
    """Slurm failed transiently even after retries (EX_TEMPFAIL): try again later."""

    exit_code = 75


class DatabaseBusyError(CampaignctlError):
    """Another process held the database's write lock past the busy timeout (EX_TEMPFAIL): the
    command changed nothing; run it again later."""

    exit_code = 75


class StateError(CampaignctlError):
    """The local state directory or database cannot be used (EX_CANTCREAT)."""

    exit_code = 73


class ConflictError(CampaignctlError):
    """The campaign is not in a state that allows this (e.g. resume while the budget is still spent)."""

    exit_code = 5


class IntegrityError(CampaignctlError):
    """The decision log's hash chain is broken or does not match a recorded head, or the database
    refused a change to a row of it (EX_DATAERR)."""

    exit_code = 65


class OutputError(CampaignctlError):
    """An output file (a report, a Prometheus textfile) cannot be written (EX_CANTCREAT)."""

    exit_code = 73
