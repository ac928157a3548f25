"""The one exception family. The CLI catches `CampaignctlError` once and maps `exit_code`;
`kind` names the error in the `--json` error envelope (a stable word scripts may branch on)."""

from __future__ import annotations


class CampaignctlError(Exception):
    """A user-facing error: `message` says what is wrong, `hint` what to do next."""

    exit_code = 1
    kind = "error"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(CampaignctlError):
    """The command line, or a setting in the environment (CAMPAIGNCTL_LEASE_TTL), is wrong: click's
    exit 2. The CLI boundary raises it for the `--json` envelope; click reports it otherwise."""

    exit_code = 2
    kind = "usage"


class InternalError(CampaignctlError):
    """A bug: an exception no command expected (the CLI boundary's last resort)."""

    kind = "internal"


class SpecError(CampaignctlError):
    """The campaign spec (or another input file) is invalid."""

    exit_code = 3
    kind = "spec"

    def __init__(self, problems: list[str], source: str,
                 hint: str = "fix the keys above; the spec reference is in docs/spec.md") -> None:
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}", hint)
        self.problems = problems


class InputError(CampaignctlError):
    """A value given on the command line or to the API names nothing there is (a metric no task
    reported): the same exit code as an invalid spec, the input was wrong."""

    exit_code = 3
    kind = "input"


class NotFoundError(CampaignctlError):
    """A named campaign (or other object) does not exist."""

    exit_code = 4
    kind = "not_found"


class NotStartedError(CampaignctlError):
    """The attempt has written no output yet: it is pending, or ended before it started."""

    exit_code = 6
    kind = "not_started"


class SlurmUnavailableError(CampaignctlError):
    """A Slurm command is missing or failed for a non-transient reason (EX_UNAVAILABLE)."""

    exit_code = 69
    kind = "slurm_unavailable"


class ExtraMissingError(CampaignctlError):
    """A command needs an optional extra that is not installed (`mcp` without the MCP SDK):
    a program it needs is missing, as for a Slurm command (EX_UNAVAILABLE)."""

    exit_code = 69
    kind = "extra_missing"


class SiteLimitError(SlurmUnavailableError):
    """Slurm refused a submission for a site's limit on queued jobs (MaxSubmitJobs of the user's
    association or QOS): room frees as the user's queued jobs end, so the submission waits for
    it; a limit is never a failed try."""

    kind = "site_limit"


class SlurmTransientError(CampaignctlError):
    """Slurm failed transiently even after retries (EX_TEMPFAIL): try again later."""

    exit_code = 75
    kind = "slurm_transient"


class DatabaseBusyError(CampaignctlError):
    """Another process held the database's write lock past the busy timeout (EX_TEMPFAIL): the
    command changed nothing; run it again later."""

    exit_code = 75
    kind = "database_busy"


class WriteConflictError(CampaignctlError):
    """Another campaignctl wrote a row with the same key at the same moment (a unique or primary
    key): this command's transaction was rolled back; run it again (EX_TEMPFAIL). `constraint`
    names what was violated: PostgreSQL's constraint or index name, SQLite's `table.column` list."""

    exit_code = 75
    kind = "write_conflict"

    def __init__(self, message: str, hint: str = "", constraint: str = "") -> None:
        super().__init__(message, hint)
        self.constraint = constraint


class AnsweredElsewhereError(WriteConflictError):
    """Another tick answered (resubmitted or gave up) an attempt this one was about to answer at the
    same moment: the schema allows one answer per attempt, and this tick's decisions for the
    campaign were rolled back, none carried out."""


class LeaseLostError(CampaignctlError):
    """The tick lost the campaign's lease while it acted (suspended past the lease's TTL inside
    sbatch, say): another process holds it now and finishes what this one started (EX_TEMPFAIL)."""

    exit_code = 75
    kind = "lease_lost"


class LeaseHeldError(CampaignctlError):
    """Another process (any user, any host) holds the campaign's lease (EX_TEMPFAIL): run the
    command again once it is done."""

    exit_code = 75
    kind = "lease_held"


class StateError(CampaignctlError):
    """The local state directory or database cannot be used (EX_CANTCREAT)."""

    exit_code = 73
    kind = "state"


class ConflictError(CampaignctlError):
    """The campaign is not in a state that allows this (e.g. resume while the budget is still spent)."""

    exit_code = 5
    kind = "conflict"


class IntegrityError(CampaignctlError):
    """The decision log's hash chain is broken or does not match a recorded head, or the database
    refused a change to a row of it (EX_DATAERR)."""

    exit_code = 65
    kind = "integrity"


class OutputError(CampaignctlError):
    """An output file (a report, a Prometheus textfile) cannot be written (EX_CANTCREAT)."""

    exit_code = 73
    kind = "output"


class NotifyError(CampaignctlError):
    """A notify channel (webhook or command) did not take a test event (EX_UNAVAILABLE)."""

    exit_code = 69
    kind = "notify"


class PermissionDeniedError(CampaignctlError):
    """The caller may read this campaign but not change it: it belongs to another Unix user and
    does not share it with a group of the caller (EX_NOPERM)."""

    exit_code = 77
    kind = "permission"
