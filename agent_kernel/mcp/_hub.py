"""mcp.hub — ``MCPHub``: an agent's MCP servers, their connections, and their tools in its registry.

The hub starts servers lazily (``connect`` at the start of a run, or the first call after a
failure), registers each server's tools in the agent's ``ToolRegistry`` as ``MCPTool``s, and
reports every step as events the agent journals: ``mcp_connect``, ``mcp_tools_listed``,
``mcp_warning`` (a tool skipped), ``mcp_error`` (with the server's stderr tail) plus an ``error``
event of kind ``mcp``, ``mcp_elicitation``, ``mcp_sampling``, and ``mcp_resource`` (a resource a
prompt mentions, ``@server:uri``, read and attached by ``prepare``; see ``mcp.attach``).

Connections live on a private loop thread (``Runtime``); ``close`` stops every server the hub
started, and a ``weakref.finalize`` does the same when the hub is collected or the interpreter
exits, so no server outlives its agent.

Elicitation (a server asking the user for input mid-call) goes to a person when something shows
them a form (``ask``, set by the live view for its run); otherwise it never waits: the approval policy
(``AGENT_KERNEL_APPROVAL``) decides on ``mcp__<server>__elicitation``; approve accepts with the
defaults the request's schema gives (declining when a required field has none), anything else,
or no policy, declines.

Sampling (a server asking the agent's model for a completion) is answered by the agent's model,
on the loop of the run that made the call, when the server was added with ``sampling=True`` or
the policy approves ``mcp__<server>__sampling``; otherwise it is refused at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from agent_kernel._util.blocking import SHORT_LIVED_LOOP
from agent_kernel.errors import ToolError, UserError, did_you_mean
from agent_kernel.events import payloads as p
from agent_kernel.events._event import Emit, EventType, Payload
from agent_kernel.mcp._attach import check_prompt_arguments, find_mentions, listing, prompt_text, prompt_usage, resource_block, resource_known, unknown_server
from agent_kernel.mcp._connection import ConnectInfo, Connection, MCPConnectionError
from agent_kernel.mcp._runtime import Runtime
from agent_kernel.mcp._sampling import ask_model, request_summary, sampling_result
from agent_kernel.mcp._server import MCPServer
from agent_kernel.mcp._tools import MCPTool, SchemaProblem
from agent_kernel.models import _pricing as pricing
from agent_kernel.models._base import Usage
from agent_kernel.runtime._state import LoopStats
from agent_kernel.tools._output import cap_tool_output
from agent_kernel.tools._registry import ToolRegistry
from agent_kernel.tools._tool import ToolContext

#: Seconds a sampling request may take the model before it is declined.
SAMPLING_TIMEOUT_S = 300.0
#: Seconds a person has to answer an elicitation's form before it is cancelled.
ASK_TIMEOUT_S = 600.0
#: How a person answers an elicitation: given {id, server, message, schema}, returns (action,
#: content), or None when nobody can be asked (the headless policy then decides).
Ask = Callable[[dict[str, Any]], Awaitable[tuple[str, dict[str, Any] | None] | None]]
Fact = tuple[EventType, Payload]


def _shutdown(runtime: Runtime, connections: dict[str, Connection], abandoned: list[Connection]) -> None:
    """Stops every connection, each on its own loop, and the runtime (from ``close`` or the finalizer)."""
    live = [*connections.values(), *abandoned]
    abandoned.clear()
    _stop(runtime, live)
    if runtime.started:
        runtime.stop()


def _stop(runtime: Runtime, connections: Iterable[Connection]) -> None:
    """Stops ``connections``, each on its own loop; the runtime keeps running."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Connection]] = {}
    for connection in connections:
        if connection.loop is not None and connection.status != "stopped":
            by_loop.setdefault(connection.loop, []).append(connection)

    async def stop_all(live: list[Connection]) -> None:
        await asyncio.gather(*(c.stop() for c in live), return_exceptions=True)

    for loop, live in by_loop.items():
        with contextlib.suppress(Exception):
            if runtime.started and loop is runtime.loop:
                runtime.call_sync(stop_all(live), timeout=30)
            else:
                runtime.run_on(loop, stop_all(live), timeout=30)


class _SamplingBudget:
    """A server's sampling requests and tokens in one run, against its limits."""

    def __init__(self, server: MCPServer, payer: Any) -> None:
        self.server = server
        self.payer = payer  # the run's LoopStats (held so its id is not reused while counted)
        self.count = 0
        self.tokens = 0

    @property
    def tokens_left(self) -> int:
        return max(0, self.server.max_sampling_tokens - self.tokens)

    def refusal(self) -> str | None:
        """Why one more request is declined, or None."""
        name = self.server.name
        if self.count >= self.server.max_samplings:
            return (f"this run has answered {self.count} sampling requests of {name!r}, its limit; raise it with "
                    f"MCPServer.stdio({name!r}, ..., max_samplings=N)")
        if self.tokens_left <= 0:
            return (f"this run's sampling for {name!r} has spent {self.tokens} tokens, its limit; raise it with "
                    f"MCPServer.stdio({name!r}, ..., max_sampling_tokens=N)")
        return None

    def spend(self, usage: Usage | None, max_tokens: int) -> None:
        """Counts an answer's tokens: those reported, or all it was allowed when none were."""
        self.tokens += max_tokens if usage is None else usage.input_tokens + usage.output_tokens


class MCPHub:
    """The MCP servers of one agent.

    Args:
        tools: the agent's registry (or a function returning it), where server tools go.
        servers: the servers to use.
        gate: returns the agent's permission gate (its headless policy decides elicitations).
    """

    def __init__(
        self,
        tools: ToolRegistry | Callable[[], ToolRegistry],
        servers: Iterable[MCPServer] = (),
        gate: Callable[[], Any] | None = None,
        model: Callable[[], Any] | None = None,
        redactor: Callable[[], Any] | None = None,
    ) -> None:
        # A getter follows an agent whose registry is replaced (the notebook magics do that).
        self._registry = tools if callable(tools) and not isinstance(tools, ToolRegistry) else (lambda: tools)
        self._gate = gate
        self._model = model
        self._redactor = redactor
        self.servers: dict[str, MCPServer] = {}
        self.connections: dict[str, Connection] = {}
        self.runtime = Runtime()
        self.elicitations: list[p.McpElicitation] = []  # as journaled (the event has the time)
        self.samplings: list[p.McpSampling] = []
        #: A person answers elicitations through this while set (the live view sets it for its
        #: run); None: the headless policy decides.
        self.ask: Ask | None = None
        #: Facts of steps taken between runs (a server started to render a prompt), for the next run.
        self._backlog: list[Fact] = []
        self._emitters: dict[str, tuple[asyncio.AbstractEventLoop, Emit]] = {}
        #: The totals of the run that last called each server: a sampling call it answers is one
        #: of its model calls (tokens and cost), as a sub-agent's are.
        self._payers: dict[str, LoopStats] = {}
        self._reported: dict[str, int] = {}  # the connection generation whose start was recorded
        #: Sampling spent per server and run (keyed by the run's totals, whose identity is the run's).
        self._budgets: dict[tuple[str, int], _SamplingBudget] = {}
        #: Connections left on a loop no caller can reach any more; stopped on ``close``.
        self._abandoned: list[Connection] = []
        self._finalizer = weakref.finalize(self, _shutdown, self.runtime, self.connections, self._abandoned)
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
                f"mcp__<server>__<tool>. Rename one (MCPServer.stdio('{server.name}2', ...)), or first remove "
                f"the one there with agent.remove_mcp({server.name!r})."
            )
        self.servers[server.name] = server
        self.connections[server.name] = Connection(server, _weak(self, "_elicit"), _weak(self, "_sample"))
        self._learn_secrets(server)

    def _learn_secrets(self, server: MCPServer) -> None:
        """Has the agent's redactor redact what the server is given in ``env=`` and ``headers=``.

        A value passed through unchanged from this process's environment (``PATH``) is left to
        the environment's own rules; every other value of ``MIN_SECRET_LENGTH`` or more counts as
        a secret, named ``<server>.env.<NAME>`` (a header's value also by each of its words, so
        ``Bearer <token>`` hides the token).
        """
        redactor = self._redactor() if self._redactor is not None else None
        learn = getattr(redactor, "learn", None)
        if learn is None:
            return
        found: dict[str, str] = {}
        for name, value in (server.env or {}).items():
            if isinstance(value, str) and os.environ.get(name) != value:
                found[f"{server.name}.env.{name}"] = value
        for name, value in (server.headers or {}).items():
            if isinstance(value, str):
                found[f"{server.name}.headers.{name}"] = value
                for i, word in enumerate(value.split()[1:], 1):
                    found[f"{server.name}.headers.{name}.{i}"] = word
        if found:
            learn(found)

    def remove(self, name: str) -> MCPServer:
        """Stops server ``name`` if it runs and takes it and its tools away; returns it.

        Raises:
            UserError: no server has that name.
        """
        if name not in self.servers:
            known = ", ".join(map(repr, self.servers)) or "none"
            raise UserError(f"There is no MCP server named {name!r}.{did_you_mean(name, self.servers)} Servers: {known}.")
        connection = self.connections.pop(name)
        abandoned = [c for c in self._abandoned if c.server.name == name]
        self._abandoned[:] = [c for c in self._abandoned if c.server.name != name]
        _stop(self.runtime, [connection, *abandoned])
        self._unregister(name)
        for table in (self._emitters, self._payers, self._reported):
            table.pop(name, None)
        return self.servers.pop(name)

    @property
    def _tools(self) -> ToolRegistry:
        return self._registry()

    # -- connecting -------------------------------------------------------------------------

    async def connect(self) -> list[Fact]:
        """Starts every server that is not connected (in parallel); returns the events to record."""
        backlog, self._backlog = self._backlog, []
        pending = [self._usable(name) for name, c in list(self.connections.items()) if not (c.connected and self._reachable(c))]
        for connection in self.connections.values():
            # A replaced registry lost a connected server's tools: put them back.
            if connection.connected and connection.info is not None and not any(
                isinstance(t, MCPTool) and t.server == connection.server.name for t in self._tools
            ):
                self._register(connection.server, connection.info)
        if not pending:
            return backlog
        results = await asyncio.gather(*(self._start(c) for c in pending))
        return backlog + [fact for facts in results for fact in facts]

    async def prepare(self, prompt: str, limit: int | None = None, folder: Path | None = None) -> tuple[str, list[Fact]]:
        """Starts the servers and attaches the resources ``prompt`` mentions (``@server:uri``).

        Returns the prompt with each mentioned resource's text appended (see ``mcp.attach``)
        and the events to record: the servers' starts, then one ``mcp_resource`` per resource.

        Raises:
            UserError: a mentioned URI is not one of the server's resources, or reading it failed.
            MCPConnectionError: the mentioned server could not be started.
        """
        facts = await self.connect()
        try:
            prompt, attached = await self.attach_resources(prompt, limit, folder)
        except BaseException:
            self._backlog[:0] = facts  # nothing ran: the next run still records the starts
            raise
        return prompt, facts + attached

    async def attach_resources(self, prompt: str, limit: int | None = None, folder: Path | None = None) -> tuple[str, list[Fact]]:
        """``prompt`` with the text of each resource it mentions appended, capped at ``limit`` characters."""
        mentions = find_mentions(prompt, self.servers)
        blocks: list[str] = []
        facts: list[Fact] = []
        for mention in mentions:
            text, mime = await self.read_resource_text(mention.server, mention.uri)
            capped = cap_tool_output(text, limit, folder, f"resource-{mention.server}-{mention.uri}")
            mime_attr = f' mime-type="{mime}"' if mime else ""
            blocks.append(f'<mcp-resource server="{mention.server}" uri="{mention.uri}"{mime_attr}>\n{capped}\n</mcp-resource>')
            facts.append(
                (EventType.MCP_RESOURCE, p.McpResource(server=mention.server, uri=mention.uri, mime_type=mime, chars=len(text), capped=capped != text))
            )
        if not blocks:
            return prompt, []
        return prompt.rstrip() + "\n\n" + "\n\n".join(blocks), facts

    async def _ensure(self, server: str, what: str) -> Connection:
        """The connection to ``server``, started if needed (its start is recorded by the next run).

        Raises:
            UserError: the agent has no such server.
            MCPConnectionError: it could not be started.
        """
        if server not in self.connections:
            raise unknown_server(server, list(self.servers), what)
        connection = self._usable(server)
        if not connection.connected:
            self._backlog += await self._start(connection)
            if not connection.connected:
                raise MCPConnectionError(connection.error or f"MCP server {server!r} could not be started.", server, connection.stderr_tail())
        return connection

    async def _start(self, connection: Connection) -> list[Fact]:
        server = connection.server
        reconnect = connection.info is not None or connection.status == "failed"
        try:
            if SHORT_LIVED_LOOP.get():  # this loop ends with the call: the connection must not live on it
                info = await self.runtime.call(connection.start())
            else:
                info = await connection.start()
        except MCPConnectionError as exc:
            self._unregister(server.name)
            return self._error_facts(server, "connect", exc)
        if self._reported.get(server.name) == connection.generation:
            return []  # two calls raced to start it; the other one records the start
        self._reported[server.name] = connection.generation
        facts: list[Fact] = [
            (
                EventType.MCP_CONNECT,
                p.McpConnect(
                    server=server.name,
                    transport=server.transport,
                    target=server.target,
                    server_name=info.server_name,
                    server_version=info.server_version,
                    protocol_version=info.protocol_version,
                    duration_s=info.duration_s,
                    reconnect=reconnect,
                ),
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
                tool = MCPTool(self, server.name, remote, server.permissions, server.call_timeout, server.trusted)
            except SchemaProblem as exc:
                message = f"Skipped tool {remote.name!r} of MCP server {server.name!r}: {exc}. The server must fix it; its other tools work."
                facts.append((EventType.MCP_WARNING, p.McpWarning(server=server.name, tool=str(remote.name), message=message)))
                continue
            if tool.name in names:
                message = f"Skipped tool {remote.name!r} of MCP server {server.name!r}: another of its tools is also named {tool.name!r}."
                facts.append((EventType.MCP_WARNING, p.McpWarning(server=server.name, tool=str(remote.name), message=message)))
                continue
            self._tools.add(tool)
            names.append(tool.name)
        facts.append(
            (
                EventType.MCP_TOOLS_LISTED,
                p.McpToolsListed(
                    server=server.name,
                    tools=names,
                    resources=[str(resource.uri) for resource in info.resources],
                    prompts=[str(prompt.name) for prompt in info.prompts],
                ),
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
            (EventType.MCP_ERROR, p.McpError(server=server.name, phase=phase, message=str(exc), stderr_tail=exc.stderr_tail)),
            (EventType.ERROR, p.Error(message=str(exc), kind="mcp", status_code=None, server=server.name)),
        ]

    # -- where connections live -------------------------------------------------------------

    def _reachable(self, connection: Connection) -> bool:
        """Whether a call from here can reach ``connection``'s loop (it runs, or it is this one)."""
        loop, here = connection.loop, _running_loop()
        if loop is None or loop is here:
            return True
        if loop.is_closed() or not loop.is_running():
            return False
        # run_sync inside a running loop blocks that loop's thread until it returns: a call from
        # run_sync's own loop into it would wait forever. Only the private thread is safe then.
        return not SHORT_LIVED_LOOP.get() or (self.runtime.started and loop is self.runtime.loop)

    def _usable(self, server: str) -> Connection:
        """``server``'s connection, replaced by a new one when its loop can no longer be reached.

        A loop that closed took its connection's tasks (and the server process) with it; an
        idle one (an IPython loop between cells, called from ``run_sync``'s thread) cannot serve
        a call now, so its connection is set aside and stopped on ``close``.
        """
        connection = self.connections[server]
        if not self._reachable(connection):
            if connection.connected and connection.loop is not None and not connection.loop.is_closed():
                self._abandoned.append(connection)
            fresh = Connection(connection.server, _weak(self, "_elicit"), _weak(self, "_sample"))
            fresh.info, fresh.generation = connection.info, connection.generation
            self.connections[server] = connection = fresh
        return connection

    async def _on(self, connection: Connection, coro: Any) -> Any:
        """Awaits ``coro`` on ``connection``'s loop: directly when it is this one, else across loops."""
        loop = connection.loop
        if loop is None or loop is asyncio.get_running_loop():
            return await coro
        return await Runtime.call_on(loop, coro)

    # -- calling ----------------------------------------------------------------------------

    async def call_tool(self, server: str, tool: str, arguments: dict[str, Any], progress: Any, context: ToolContext | None) -> Any:
        """Calls ``tool`` on ``server``, starting the server first if it is down.

        Raises:
            ToolError: the server could not be started or went away (an ``mcp_error`` and an
                ``error`` event name it and quote its stderr).
        """
        emit = _emitter_of(context)
        if server not in self.connections:
            raise ToolError(f"MCP server {server!r} was removed from this agent.")
        connection = self._usable(server)
        if not connection.connected:
            for kind, data in await self._start(connection):
                emit(kind, data)
            if not connection.connected:
                raise ToolError(f"{connection.error} The call did not run; it will be retried on a new connection next time.")
        if emit is not _ignore:
            self._emitters[server] = (asyncio.get_running_loop(), emit)
        stats = getattr(getattr(context, "run", None), "stats", None)
        if isinstance(stats, LoopStats):
            self._payers[server] = stats
        try:
            return await self._on(connection, connection.call_tool(tool, arguments, progress))
        except MCPConnectionError as exc:
            for kind, data in self._error_facts(connection.server, "call", exc):
                emit(kind, data)
            raise ToolError(f"{exc}\nThe next call starts the server again.") from None

    async def read_resource(self, server: str, uri: str) -> Any:
        """Reads resource ``uri`` of ``server`` (connecting first if needed); the SDK's ``ReadResourceResult``.

        Raises:
            UserError: no such server, or ``uri`` is neither a resource it lists nor matches one of
                its URI templates (the message lists them).
        """
        connection = await self._ensure(server, f"@{server}:{uri}")
        info = connection.info
        if info is not None and (info.resources or info.resource_templates) and not resource_known(uri, info.resources, info.resource_templates):
            names = [str(r.uri) for r in info.resources] + [str(t.uri_template) for t in info.resource_templates]
            raise UserError(f"@{server}:{uri}: MCP server {server!r} has no resource {uri!r}. Its resources: {listing(names)}.")
        try:
            return await self._on(connection, connection.read_resource(uri))
        except MCPConnectionError:
            raise
        except Exception as exc:  # the server refused (an MCP error): say which resource
            raise UserError(f"@{server}:{uri}: MCP server {server!r} could not read it: {exc}") from None

    async def read_resource_text(self, server: str, uri: str) -> tuple[str, str | None]:
        """Resource ``uri`` of ``server`` as text (a binary one described), and its MIME type."""
        return resource_block(server, uri, await self.read_resource(server, uri))

    async def get_prompt(self, server: str, name: str, arguments: dict[str, str] | None = None) -> str:
        """Prompt ``name`` of ``server`` rendered with ``arguments``, as the text of one user message.

        Raises:
            UserError: no such server or prompt (the message lists its prompts and their
                arguments), a required argument is missing, or one is unknown.
        """
        arguments = dict(arguments or {})
        connection = await self._ensure(server, f"{server}:{name}")
        prompts = list(connection.info.prompts) if connection.info is not None else []
        prompt = next((p for p in prompts if str(p.name) == name), None)
        if prompt is None:
            known = listing([f"{server}:{prompt_usage(p)}" for p in prompts]) if prompts else "none"
            raise UserError(f"MCP server {server!r} has no prompt {name!r}.{did_you_mean(name, [str(p.name) for p in prompts])} Its prompts: {known}.")
        check_prompt_arguments(server, prompt, arguments)
        try:
            result = await self._on(connection, connection.get_prompt(name, arguments))
        except MCPConnectionError:
            raise
        except Exception as exc:
            raise UserError(f"MCP prompt {server}:{name} failed on the server: {exc}") from None
        return prompt_text(result)

    # -- elicitation ------------------------------------------------------------------------

    async def _elicit(self, server: MCPServer, params: Any) -> Any:
        """Answers a server's request for user input: a person through ``ask``, else the headless policy."""
        from mcp import types

        message = str(getattr(params, "message", ""))
        schema = getattr(params, "requested_schema", None)
        schema = schema if isinstance(schema, dict) else getattr(schema, "model_dump", lambda **_: {})(by_alias=True, exclude_none=True)
        answer = await self._ask_person(server, message, schema) if self.ask is not None else None
        # Nobody to show the form to (the view never rendered: nbval, papermill): the policy decides.
        action, content, reason = answer if answer is not None else self._policy_answer(server, message, schema)
        record = p.McpElicitation(server=server.name, message=message, schema=schema, action=action, content=content, reason=reason)
        self.elicitations.append(record)
        self._report(server.name, EventType.MCP_ELICITATION, record)
        return types.ElicitResult(action=action, content=content)

    async def _ask_person(
        self, server: MCPServer, message: str, schema: dict[str, Any]
    ) -> tuple[Literal["accept", "decline", "cancel"], dict[str, Any] | None, str] | None:
        """The answer a person gives through ``ask`` (the live view's form), checked against the schema; None: nobody can answer."""
        import jsonschema  # type: ignore[import-untyped]

        ask = self.ask
        assert ask is not None
        request = {"id": f"elicitation-{len(self.elicitations) + 1}", "server": server.name, "message": message, "schema": schema}
        try:
            answer = await self._on_caller(server.name, ask(request), ASK_TIMEOUT_S)
        except asyncio.TimeoutError:
            return "cancel", None, f"nobody answered within {ASK_TIMEOUT_S / 60:g} minutes"
        if answer is None:
            return None
        action, content = answer
        if action != "accept":
            return ("cancel" if action == "cancel" else "decline"), None, f"the user chose {action}"
        content = dict(content or {})
        problem = next(iter(jsonschema.Draft202012Validator(schema).iter_errors(content)), None)
        if problem is not None:
            return "decline", None, f"the answer does not fit the form: {problem.message}"
        return "accept", content, "the user answered"

    def _policy_answer(self, server: MCPServer, message: str, schema: dict[str, Any]) -> tuple[Literal["accept", "decline"], dict[str, Any] | None, str]:
        """The headless answer: the approval policy decides; never waits."""
        from agent_kernel.guard._approvals import ApprovalRequest

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
        return action, content, reason

    def _report(self, server: str, kind: EventType, data: Payload) -> None:
        """Records ``data`` in the run that last called ``server`` (from any thread)."""
        target = self._emitters.get(server)
        if target is None:
            return
        loop, emit = target
        with contextlib.suppress(RuntimeError):  # the caller's loop has closed
            if _running_loop() is loop:
                emit(kind, data)
            else:
                loop.call_soon_threadsafe(emit, kind, data)

    def _charge(self, server: str, usage: Usage | None, cost: float | None) -> None:
        """Adds a sampling call's tokens and cost to the totals of the run that called ``server``
        (on that run's loop, where its totals are kept)."""
        stats = self._payers.get(server)
        target = self._emitters.get(server)
        if stats is None:
            return
        add = functools.partial(stats.add_usage, usage or Usage(), cost)
        loop = target[0] if target is not None else None
        if loop is None or _running_loop() is loop:
            add()
            return
        with contextlib.suppress(RuntimeError):  # the caller's loop has closed
            loop.call_soon_threadsafe(add)

    # -- sampling ---------------------------------------------------------------------------

    async def _sample(self, server: MCPServer, params: Any) -> Any:
        """Answers a server's sampling request with the agent's model, when allowed; never waits for a person."""
        from mcp import types


        summary = request_summary(params)
        name = f"{server.prefix}sampling"
        record = p.McpSampling(
            server=server.name,
            messages=summary,
            system_prompt=getattr(params, "system_prompt", None),
            max_tokens=getattr(params, "max_tokens", None),
            action="decline",
            model=None,
            text=None,
            usage=None,
            cost_usd=None,
            stop_reason=None,
            duration_s=None,
        )
        if server.sampling:
            allowed, reason = True, f"MCPServer({server.name!r}, sampling=True) allows it"
        else:
            gate = self._gate() if self._gate is not None else None
            policy = getattr(gate, "policy", None)
            # Only an entry naming this server's sampling itself decides: a glob for its tools
            # (mcp__srv__*) or auto_approve is about tool calls, not about spending the model.
            exact = getattr(policy, "decide_exactly", None)
            decided = exact(name) if callable(exact) else None
            allowed = decided is not None and decided.allowed
            policy_name = getattr(policy, "name", "approval")
            reason = (
                f"the {policy_name} policy approved it" if allowed
                else f"the {policy_name} policy declined it" if decided is not None
                else f"sampling is off for this server: pass sampling=True to MCPServer.stdio({server.name!r}, ...) "
                f"or give the approval policy an entry for {name} itself (AGENT_KERNEL_APPROVAL=scripted:{name}=approve)"
            )
        budget = self._sampling_budget(server)
        if allowed:
            refusal = budget.refusal()
            if refusal is not None:
                allowed, reason = False, refusal
            elif getattr(params, "max_tokens", None) is None or int(params.max_tokens) > budget.tokens_left:
                params = params.model_copy(update={"max_tokens": budget.tokens_left})
        model = self._model() if self._model is not None else None
        answer: Any = None
        if allowed and model is None:
            allowed, reason = False, "this agent has no model to answer with"
        if allowed:
            budget.count += 1  # counted when asked: a request the model fails on still spent a turn
            started = time.monotonic()
            try:
                text, stop, usage, served = await self._on_caller(server.name, ask_model(model, params))
                # Named and priced as the loop names and prices a turn: by the model the provider
                # says answered, else the adapter's; no usage reported (llama.cpp streams none)
                # makes the cost unknown, not free.
                model_name = served or str(getattr(model, "name", ""))
                cost = None if usage is None else pricing.cost(model_name, usage)
                record.update(p.McpSampling(action="accept", model=model_name or None, text=text, usage=None if usage is None else usage.to_dict(),
                                            cost_usd=cost, stop_reason=stop, duration_s=time.monotonic() - started))
                self._charge(server.name, usage, cost)
                budget.spend(usage, int(params.max_tokens))
                answer = sampling_result(text, model_name, stop)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a model error is the server's answer, not the run's failure
                reason = f"{reason}, but the model failed: {type(exc).__name__}: {exc}"
        record["reason"] = reason
        self.samplings.append(record)
        self._report(server.name, EventType.MCP_SAMPLING, record)
        # -1 is what MCP clients answer when the user rejects a sampling request.
        return answer if answer is not None else types.ErrorData(code=-1, message=f"Sampling declined: {reason}.")

    def _sampling_budget(self, server: MCPServer) -> _SamplingBudget:
        """What ``server`` may still spend on sampling in the run that last called it."""
        payer = self._payers.get(server.name)
        key = (server.name, id(payer))
        budget = self._budgets.get(key)
        if budget is None or budget.payer is not payer:
            budget = self._budgets[key] = _SamplingBudget(server, payer)
        return budget

    async def _on_caller(self, server: str, coro: Any, timeout: float = SAMPLING_TIMEOUT_S) -> Any:
        """Runs ``coro`` on the loop of the run that called ``server`` (where the model and the view live), bounded in time."""
        target = self._emitters.get(server)
        loop = target[0] if target is not None and not target[0].is_closed() else None
        if loop is None or loop is _running_loop():
            return await asyncio.wait_for(coro, timeout)
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        finally:
            future.cancel()

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
        _shutdown(self.runtime, self.connections, self._abandoned)
        for name in self.servers:
            self._unregister(name)

    async def aclose(self) -> None:
        """``close`` without blocking the caller's event loop."""
        await asyncio.to_thread(self.close)


def _weak(hub: MCPHub, method: str) -> Callable[[MCPServer, Any], Any]:
    """``hub.<method>`` without a strong reference, so the finalizer can run when the hub is dropped."""
    ref = weakref.ref(hub)

    async def answer(server: MCPServer, params: Any) -> Any:
        owner = ref()
        if owner is None:
            from mcp import types

            return types.ErrorData(code=-1, message="The agent is gone.")
        return await getattr(owner, method)(server, params)

    return answer


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _ignore(kind: EventType, data: Payload) -> None:
    return None


def _emitter_of(context: ToolContext | None) -> Emit:
    """Where a call's MCP events go: its run's emitter (nowhere for a tool called outside a run)."""
    run = context.run if context is not None else None
    em = getattr(run, "emitter", None)  # a context built outside the loop may lack one
    return em.later if em is not None else _ignore


def _defaults(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The answer a form would give untouched: each property's default; None if a required one has none."""
    props = schema.get("properties") or {}
    content = {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}
    if any(k not in content for k in schema.get("required") or ()):
        return None
    return content
