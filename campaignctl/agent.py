"""`campaignctl mcp`: a Model Context Protocol server over stdio, so a coding assistant answers
"why did task 7 fail and what happens next" from campaignctl's own evidence.

Every tool is read-only: it calls the same services as `status`, `output`, `log`, `results`,
`profile show`, `simulate` and `reconcile --dry-run` (which takes no lock or lease and writes
nothing), and returns what their `--json` prints. No tool submits, cancels, changes a policy or
acts on a job. An error a command would print (no such campaign, a bad spec) comes back as the
tool's error, with its hint.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from campaignctl import __version__
from campaignctl.core.base.errors import CampaignctlError

STATUS_ROWS = 100  # task rows a campaign_status answer holds by default: a 10,000-task answer is no reading
OUTPUT_LINES = 50  # a task's output tail by default: the traceback that explains a failure
MAX_OUTPUT_LINES = 2000
MAX_OUTPUT_BYTES = 256 * 1024
MAX_DECISIONS = 200

P = ParamSpec("P")
R = TypeVar("R")


class ToolError(Exception):
    """What a command would print as `error:` and `hint:`, for the assistant to read."""


def _tool_error(message: str) -> Exception:
    """The SDK's ToolError, whose message reaches the client (any other exception reads only
    "Error executing tool …" there); ours where the SDK is not installed (tools called directly)."""
    try:
        from mcp.server.mcpserver.exceptions import ToolError as SdkToolError
    except ImportError:
        return ToolError(message)
    return SdkToolError(message)


def _answered(tool: Callable[P, R]) -> Callable[P, R]:
    @wraps(tool)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return tool(*args, **kwargs)
        except CampaignctlError as exc:
            raise _tool_error(f"{exc.message} (hint: {exc.hint})" if exc.hint else exc.message) from None
    return run


@_answered
def campaigns() -> dict[str, Any]:
    """Every campaign in the store: state, task counts by state, attempts, decisions, and whether
    the control loop (cron's reconcile) is running."""
    from campaignctl.services.status import status
    return status(None).to_dict()


@_answered
def campaign_status(campaign: str, states: list[str] | None = None, tasks: list[int] | None = None,
                    limit: int = STATUS_ROWS) -> dict[str, Any]:
    """One campaign's tasks from one sacct call: each task's state, attempts, exit code, nodes,
    params, telemetry and latest decision, with the spend against its budget. `states` (FAILED,
    OUT_OF_MEMORY …) and `tasks` (indices) narrow the rows; `limit` rows at most (0: every one),
    `rows_matched` says how many matched."""
    from campaignctl.services.status import status
    return status(campaign, states or (), tasks or (), limit=max(0, limit)).to_dict()


@_answered
def task_output(campaign: str, task: int, attempt: int | None = None, lines: int = OUTPUT_LINES) -> dict[str, Any]:
    """The last `lines` lines a task's program printed (stdout and stderr) in an attempt (default:
    its latest), and Slurm's own lines on how it ended the job (an oom-kill, a time limit)."""
    from campaignctl.services.output import first_offset, locate, masked, read_text, slurm_endings
    target = locate(campaign, task, attempt)
    start = first_offset(target, max(0, min(lines, MAX_OUTPUT_LINES)))
    # a line can be anything long (a progress bar never ended, a dump): at most the last
    # MAX_OUTPUT_BYTES of the lines asked for; a 300 MB log once came back as 512 MB of JSON
    cut = max(start, Path(target.path).stat().st_size - MAX_OUTPUT_BYTES)
    text = "".join(masked(read_text(target, cut)))[-MAX_OUTPUT_BYTES:]
    return {**target.to_dict(), "output": text, "slurm": slurm_endings(target), "cut": cut > start}


@_answered
def decisions(campaign: str, task: int | None = None, limit: int = 50) -> dict[str, Any]:
    """The decision log, newest last: each decision's rule, action, reason, the evidence it was
    decided on (inputs: sacct's state, exit code, nodes, the output's cause …), its outcome and
    the policy that made it. `task` narrows to one task (-1: campaign-wide decisions)."""
    from campaignctl.services.log import decision_log
    entries = decision_log(campaign, task, max(1, min(limit, MAX_DECISIONS)))
    return {"campaign": campaign, "decisions": [e.to_dict() for e in entries]}


@_answered
def results(campaign: str, metric: str | None = None, by: str = "last", goal: str | None = None) -> dict[str, Any]:
    """One row per config, the winner first: its params, state, final and best value of the
    metric, and what it used of what Slurm allocated."""
    from campaignctl.services.results import results as results_service
    return results_service(campaign, metric, by, goal).to_dict()


@_answered
def profile(name: str) -> dict[str, Any]:
    """What a kind of work (a spec's `profile:`) used across campaigns: memory, time and GPU use
    per group, and what right-sizing would ask now."""
    from campaignctl.services.profiles import show_profile
    return show_profile(name).to_dict()


@_answered
def next_tick(campaign: str) -> dict[str, Any]:
    """What the next reconcile tick would decide for the campaign now (`reconcile --dry-run`):
    each decision with its rule, action and reason. Nothing is carried out or written."""
    from campaignctl.services.reconcile import reconcile
    return reconcile(campaign, dry_run=True).to_dict()


@_answered
def simulate(spec: str, policies: list[str] | None = None, workload: str | None = None,
             seed: int = 1) -> dict[str, Any]:
    """A spec's tasks on a simulated cluster under each policy (default: the spec's own and the
    attempt-scaled baseline): completions, makespan, GPU-hours allocated and wasted, decisions.
    Touches no Slurm and no store."""
    from campaignctl.services.simulate import simulate as simulate_service
    return simulate_service(Path(spec), list(policies or ()), workload, seed, None).to_dict()


TOOLS = (campaigns, campaign_status, task_output, decisions, results, profile, next_tick, simulate)


def serve() -> None:
    """Run the server on stdin/stdout until the client closes it."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("campaignctl", version=__version__,
                       instructions="Read-only view of campaignctl's Slurm training campaigns: their "
                                    "state, each task's output, the decisions with their evidence, "
                                    "results, and what the next tick would do.")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
    for tool in TOOLS:
        server.tool(annotations=read_only)(tool)
    import anyio

    anyio.run(_serve_stdio, server)


PARSE_ERROR = -32700  # JSON-RPC 2.0: "Invalid JSON was received by the server"


async def _serve_stdio(server: Any) -> None:
    """The SDK's stdio transport, with a line that is no JSON-RPC message answered as JSON-RPC 2.0
    says (a Parse error with id null) instead of passed to the session as an exception, which
    answered nothing: a client waited for ever. The server goes on with the next line."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp.types import ErrorData, JSONRPCError

    async with stdio_server() as (read_stream, write_stream):
        passed, received = anyio.create_memory_object_stream[Any](0)

        async def screen() -> None:
            async with passed:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        error = ErrorData(code=PARSE_ERROR, message="Parse error: not a JSON-RPC 2.0 message")
                        await write_stream.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error)))
                    else:
                        await passed.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(screen)
            # what MCPServer.run_stdio_async does with the SDK's own streams (no public accessor)
            low = server._lowlevel_server
            await low.run(received, write_stream, low.create_initialization_options())
            tasks.cancel_scope.cancel()
