"""`campaignctl mcp`: the read-only Model Context Protocol server (campaignctl/agent.py)."""

from __future__ import annotations

from campaignctl.core.base.errors import ExtraMissingError


def mcp() -> None:
    """Serve campaignctl's read-only tools to a coding assistant over MCP (stdio): campaigns,
    a campaign's status, a task's output tail, decisions with their evidence, results, a profile,
    what the next tick would do, and simulate. No tool changes anything. Needs the `mcp` extra
    (pip install 'campaignctl[mcp]'); without it, exit 69.

    Example (Claude Code): claude mcp add campaignctl -- campaignctl mcp
    """
    try:
        import mcp.server.mcpserver  # noqa: F401  (the SDK: fail here with a hint, not mid-session)

        from campaignctl.agent import serve
    except ImportError as exc:
        raise ExtraMissingError(f"campaignctl mcp needs the MCP SDK: {exc}",
                         "pip install 'campaignctl[mcp]' (mcp>=2.3)") from None
    serve()
