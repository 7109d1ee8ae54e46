"""mcp.hub — ``MCPHub``: an agent's MCP servers, their connections, and their tools in its registry.

The hub starts servers lazily (``connect`` at the start of a run, or the first call after a
failure), registers each server's tools in the agent's ``ToolRegistry`` as ``MCPTool``s, and
reports every step as events the agent journals: ``mcp_connect``, ``mcp_tools_listed``,
``mcp_warning`` (a tool skipped), ``mcp_error`` (with the server's stderr tail) plus an ``error``
event of kind ``mcp``, and ``mcp_elicitation``.

Connections live on a private loop thread (``Runtime``); ``close`` stops every server the hub
started, and a ``weakref.finalize`` does the same when the hub is collected or the interpreter
exits, so no server outlives its agent.

Elicitation (a server asking the user for input mid-call) never waits: the approval policy
(``AGENT_KERNEL_APPROVAL``) decides on ``mcp__<server>__elicitation``; approve accepts with the
defaults the request's schema gives (declining when a required field has none), anything else,
or no policy, declines.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Literal

from ..errors import ToolError, UserError
from ..events import EventType
from ..tools.registry import ToolRegistry
from ..tools.tool import ToolContext
from .connection import ConnectInfo, Connection, MCPConnectionError
from .runtime import Runtime
from .server import MCPServer
from .tools import MCPTool, SchemaProblem

__all__ = ["MCPHub"]

Emit = Callable[[EventType, dict[str, Any]], None]
Fact = tuple[EventType, dict[str, Any]]


def _shutdown(runtime: Runtime, connections: dict[str, Connection]) -> None:
    """Stops every connection and the runtime (from ``close`` or the finalizer)."""
    if not runtime.started:
        return
    live = list(connections.values())

    async def stop_all() -> None:
        await asyncio.gather(*(c.stop() for c in live), return_exceptions=True)

    with contextlib.suppress(Exception):
        runtime.call_sync(stop_all(), timeout=30)
    runtime.stop()


class MCPHub:
    """The MCP servers of one agent.

    Args:
        tools: the agent's registry (or a function returning it), where server tools go.
        servers: the servers to use.
        gate: returns the agent's permission gate (its headless policy decides elicitations).
    """

    def __init__(
        self, tools: ToolRegistry | Callable[[], ToolRegistry], servers: Iterable[MCPServer] = (), gate: Callable[[], Any] | None = None
    ) -> None:
        # A getter follows an agent whose registry is replaced (the notebook magics do that).
        self._registry = tools if callable(tools) and not isinstance(tools, ToolRegistry) else (lambda: tools)
        self._gate = gate
        self.servers: dict[str, MCPServer] = {}
        self.connections: dict[str, Connection] = {}
        self.runtime = Runtime()
        self.elicitations: list[dict[str, Any]] = []
        self._emitters: dict[str, tuple[asyncio.AbstractEventLoop, Emit]] = {}
        self._reported: dict[str, int] = {}  # the connection generation whose start was recorded
        self._finalizer = weakref.finalize(self, _shutdown, self.runtime, self.connections)
        for server in servers:
            self.add(server)

    def __repr__(self) -> str:
        return f"MCPHub({', '.join(f'{n}={c.status}' for n, c in self.connections.items())})"

    def add(self, server: MCPServer) -> None:
        """Adds a server; it starts on the next run.

        Raises:
            UserError: not an ``MCPServer``, or a server of that name is already there.
        """
        if not isinstance(server, MCPServer):
            raise UserError(f"{server!r} is not an MCP server; build one with MCPServer.stdio(name, command, ...) or MCPServer.http(name, url).")
        if server.name in self.servers:
            raise UserError(
                f"Two MCP servers are named {server.name!r}; names must be unique because tools are called "
                f"mcp__<server>__<tool>. Rename one: MCPServer.stdio('{server.name}2', ...)."
            )
        self.servers[server.name] = server
        self.connections[server.name] = Connection(server, _weak_elicit(self))

    @property
    def _tools(self) -> ToolRegistry:
        return self._registry()

    # -- connecting -------------------------------------------------------------------------

    async def connect(self) -> list[Fact]:
        """Starts every server that is not connected (in parallel); returns the events to record."""
        pending = [c for c in self.connections.values() if not c.connected]
        for connection in self.connections.values():
            # A replaced registry lost a connected server's tools: put them back.
            if connection.connected and connection.info is not None and not any(
                isinstance(t, MCPTool) and t.server == connection.server.name for t in self._tools
            ):
                self._register(connection.server, connection.info)
        if not pending:
            return []
        results = await asyncio.gather(*(self._start(c) for c in pending))
        return [fact for facts in results for fact in facts]

    async def _start(self, connection: Connection) -> list[Fact]:
        server = connection.server
        reconnect = connection.info is not None or connection.status == "failed"
        try:
            info = await self.runtime.call(connection.start())
        except MCPConnectionError as exc:
            self._unregister(server.name)
            return self._error_facts(server, "connect", exc)
        if self._reported.get(server.name) == connection.generation:
            return []  # two calls raced to start it; the other one records the start
        self._reported[server.name] = connection.generation
        facts: list[Fact] = [
            (
                EventType.MCP_CONNECT,
                {
                    "server": server.name,
                    "transport": server.transport,
                    "target": server.target,
                    "server_name": info.server_name,
                    "server_version": info.server_version,
                    "protocol_version": info.protocol_version,
                    "duration_s": info.duration_s,
                    "reconnect": reconnect,
                },
            )
        ]
        facts += self._register(server, info)
        return facts

    def _register(self, server: MCPServer, info: ConnectInfo) -> list[Fact]:
        self._unregister(server.name)
        facts: list[Fact] = []
        names: list[str] = []
        for remote in info.tools:
            try:
                tool = MCPTool(self, server.name, remote, server.permissions)
            except SchemaProblem as exc:
                message = f"Skipped tool {remote.name!r} of MCP server {server.name!r}: {exc}. The server must fix it; its other tools work."
                facts.append((EventType.MCP_WARNING, {"server": server.name, "tool": str(remote.name), "message": message}))
                continue
            if tool.name in names:
                message = f"Skipped tool {remote.name!r} of MCP server {server.name!r}: another of its tools is also named {tool.name!r}."
                facts.append((EventType.MCP_WARNING, {"server": server.name, "tool": str(remote.name), "message": message}))
                continue
            self._tools.add(tool)
            names.append(tool.name)
        facts.append(
            (
                EventType.MCP_TOOLS_LISTED,
                {
                    "server": server.name,
                    "tools": names,
                    "resources": [str(r.uri) for r in info.resources],
                    "prompts": [str(p.name) for p in info.prompts],
                },
            )
        )
        return facts

    def _unregister(self, server: str) -> None:
        for tool in list(self._tools):
            if isinstance(tool, MCPTool) and tool.server == server:
                self._tools.remove(tool.name)

    @staticmethod
    def _error_facts(server: MCPServer, phase: str, exc: MCPConnectionError) -> list[Fact]:
        return [
            (EventType.MCP_ERROR, {"server": server.name, "phase": phase, "message": str(exc), "stderr_tail": exc.stderr_tail}),
            (EventType.ERROR, {"message": str(exc), "kind": "mcp", "status_code": None, "server": server.name}),
        ]

    # -- calling ----------------------------------------------------------------------------

    async def call_tool(self, server: str, tool: str, arguments: dict[str, Any], progress: Any, context: ToolContext | None) -> Any:
        """Calls ``tool`` on ``server``, starting the server first if it is down.

        Raises:
            ToolError: the server could not be started or went away (an ``mcp_error`` and an
                ``error`` event name it and quote its stderr).
        """
        emit = _emitter_of(context)
        connection = self.connections.get(server)
        if connection is None:
            raise ToolError(f"MCP server {server!r} was removed from this agent.")
        if not connection.connected:
            for kind, data in await self._start(connection):
                emit(kind, data)
            if not connection.connected:
                raise ToolError(f"{connection.error} The call did not run; it will be retried on a new connection next time.")
        if emit is not _ignore:
            self._emitters[server] = (asyncio.get_running_loop(), emit)
        try:
            return await self.runtime.call(connection.call_tool(tool, arguments, progress))
        except MCPConnectionError as exc:
            for kind, data in self._error_facts(connection.server, "call", exc):
                emit(kind, data)
            raise ToolError(f"{exc}\nThe next call starts the server again.") from None

    async def read_resource(self, server: str, uri: str) -> Any:
        """Reads resource ``uri`` of ``server`` (connecting first if needed)."""
        connection = self.connections[server]
        if not connection.connected:
            await self.runtime.call(connection.start())
        return await self.runtime.call(connection.read_resource(uri))

    # -- elicitation ------------------------------------------------------------------------

    async def _elicit(self, server: MCPServer, params: Any) -> Any:
        """Answers a server's request for user input from the headless policy; never waits."""
        from mcp import types

        from ..approvals import ApprovalRequest

        message = str(getattr(params, "message", ""))
        schema = getattr(params, "requested_schema", None)
        schema = schema if isinstance(schema, dict) else getattr(schema, "model_dump", lambda **_: {})(by_alias=True, exclude_none=True)
        name = f"{server.prefix}elicitation"
        gate = self._gate() if self._gate is not None else None
        policy = getattr(gate, "policy", None)
        request = ApprovalRequest(f"elicitation-{len(self.elicitations) + 1}", name, {"message": message, "schema": schema}, f"{name}({message})", None, "the MCP server asks the user for input")
        decided = policy.decide(request) if policy is not None else None
        action: Literal["accept", "decline"] = "decline"
        content: dict[str, Any] | None = None
        reason = "no approval policy accepts it (set AGENT_KERNEL_APPROVAL)"
        if decided is not None and decided.allowed:
            content = _defaults(schema)
            if content is None:
                reason = "the policy approved it, but a required field has no default to answer with"
            else:
                action, reason = "accept", f"the {getattr(policy, 'name', 'approval')} policy approved it"
        elif decided is not None:
            reason = f"the {getattr(policy, 'name', 'approval')} policy declined it"
        record = {"server": server.name, "message": message, "schema": schema, "action": action, "content": content, "reason": reason, "ts": time.time()}
        self.elicitations.append(record)
        target = self._emitters.get(server.name)
        if target is not None:
            loop, emit = target
            with contextlib.suppress(RuntimeError):  # the caller's loop has closed
                loop.call_soon_threadsafe(emit, EventType.MCP_ELICITATION, {k: v for k, v in record.items() if k != "ts"})
        return types.ElicitResult(action=action, content=content)

    # -- status and shutdown ----------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        """One row per server: name, transport, target, status, tools, resources, prompts, error."""
        rows = []
        for name, connection in self.connections.items():
            info = connection.info if connection.connected else None
            rows.append(
                {
                    "server": name,
                    "transport": connection.server.transport,
                    "target": connection.server.target,
                    "status": connection.status,
                    "tools": [t.name for t in self._tools if isinstance(t, MCPTool) and t.server == name],
                    "resources": [str(r.uri) for r in info.resources] if info else [],
                    "prompts": [str(p.name) for p in info.prompts] if info else [],
                    "error": connection.error,
                }
            )
        return rows

    def close(self) -> None:
        """Stops every server this hub started (they start again on the next run)."""
        _shutdown(self.runtime, self.connections)
        for name in self.servers:
            self._unregister(name)

    async def aclose(self) -> None:
        """``close`` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)


def _weak_elicit(hub: MCPHub) -> Callable[[MCPServer, Any], Any]:
    """``hub._elicit`` without a strong reference, so the finalizer can run when the hub is dropped."""
    ref = weakref.ref(hub)

    async def elicit(server: MCPServer, params: Any) -> Any:
        owner = ref()
        if owner is None:
            from mcp import types

            return types.ElicitResult(action="decline")
        return await owner._elicit(server, params)

    return elicit


def _ignore(kind: EventType, data: dict[str, Any]) -> None:
    return None


def _emitter_of(context: ToolContext | None) -> Emit:
    run = getattr(context, "run", None)
    em = getattr(run, "emitter", None)
    if em is None and run is not None:  # an ExecutionContext that keeps it among its extras
        em = getattr(run, "extras", {}).get("emitter")
    return em.later if em is not None else _ignore


def _defaults(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The answer a form would give untouched: each property's default; None if a required one has none."""
    props = schema.get("properties") or {}
    content = {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}
    if any(k not in content for k in schema.get("required") or ()):
        return None
    return content
