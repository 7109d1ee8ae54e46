"""mcp — Model Context Protocol servers as an agent's tools (the official ``mcp`` SDK, client side).

    >>> from agent_kernel import Agent
    >>> from agent_kernel.mcp import MCPServer
    >>> time_server = MCPServer.stdio("time", "python", "-m", "mcp_server_time")
    >>> agent = Agent("offline", mcp=[time_server], journal=None)  # doctest: +SKIP
    >>> agent.run_sync("What time is it in UTC?")  # doctest: +SKIP

This layer sits above tools, permissions and events; nothing below imports it. The SDK itself is
imported only when a server starts, so ``import agent_kernel.mcp`` works without the ``[mcp]``
extra and a missing SDK is reported when it is needed.
"""

from __future__ import annotations

from agent_kernel.mcp._connection import MCPConnectionError
from agent_kernel.mcp._hub import MCPHub
from agent_kernel.mcp._server import MCPServer
from agent_kernel.mcp._tools import MCPTool

__all__ = ["MCPConnectionError", "MCPHub", "MCPServer", "MCPTool"]
