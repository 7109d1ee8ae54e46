"""mcp.connection — one live session with one MCP server: start, list, call, stop, stderr tail.

A ``Connection`` runs on the agent's MCP ``Runtime`` loop. ``start`` spawns the subprocess (stdio)
or opens the HTTP session, initializes, and lists tools, resources and prompts; the session's
context managers stay open in a task of their own until ``stop``. A call that finds the transport
gone (the server crashed, the HTTP endpoint went away) marks the connection failed and stops it;
the next use starts it again.

A stdio server's stderr goes to a file of its own, so errors can quote its last lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_kernel.errors import AgentKernelError
from agent_kernel.mcp._server import MCPServer

if sys.version_info < (3, 11):  # pragma: no cover - anyio brings the backport there
    from exceptiongroup import BaseExceptionGroup  # type: ignore[import-not-found,unused-ignore]

#: Characters of a server's stderr quoted in error messages and events.
STDERR_TAIL_CHARS = 2000

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
Elicit = Callable[[MCPServer, Any], Awaitable[Any]]
Sample = Callable[[MCPServer, Any], Awaitable[Any]]


def missing_sdk_message() -> str:
    """What to do when the ``mcp`` package is not installed."""
    return "MCP servers need the official MCP SDK: pip install 'agent_kernel[mcp]' (or pip install mcp)."


class MCPConnectionError(AgentKernelError):
    """An MCP server could not be started, reached, or kept alive.

    Attributes:
        server: the server's name.
        stderr_tail: the last lines the server wrote to stderr (stdio), or "".
    """

    def __init__(self, message: str, server: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.server = server
        self.stderr_tail = stderr_tail


@dataclass
class ConnectInfo:
    """What ``start`` learnt: the server's identity and what it offers."""

    server_name: str | None
    server_version: str | None
    protocol_version: str | None
    tools: list[Any]
    resources: list[Any] = field(default_factory=list)
    prompts: list[Any] = field(default_factory=list)
    duration_s: float = 0.0
    resource_templates: list[Any] = field(default_factory=list)


def _root_cause(exc: BaseException) -> BaseException:
    """The first leaf of nested exception groups (anyio task groups wrap transport errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class Connection:
    """A session with one server. Every coroutine here runs on the MCP runtime's loop.

    Attributes:
        server: the configuration.
        status: ``stopped``, ``starting``, ``connected`` or ``failed``.
        info: what the last successful start learnt, or None.
        error: the last failure, in words, or None.
    """

    def __init__(self, server: MCPServer, elicit: Elicit | None = None, sample: Sample | None = None) -> None:
        self.server = server
        self.status = "stopped"
        self.info: ConnectInfo | None = None
        self.error: str | None = None
        #: Counts successful starts, so callers racing to start it can tell who did.
        self.generation = 0
        self._elicit = elicit
        self._sample = sample
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._stderr_path: str | None = None
        self._start_lock: asyncio.Lock | None = None
        #: The loop the session lives on (set by ``start``); every use must run there.
        self.loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"Connection({self.server.name!r}, status={self.status!r})"

    @property
    def connected(self) -> bool:
        """True while the session is up."""
        return self.status == "connected" and self._session is not None

    def stderr_tail(self, chars: int = STDERR_TAIL_CHARS) -> str:
        """The last ``chars`` characters the server wrote to stderr ("" for HTTP servers)."""
        if self._stderr_path is None:
            return ""
        try:
            with open(self._stderr_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - chars * 4))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return text[-chars:].strip()

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> ConnectInfo:
        """Connects (if not connected) and returns what the server offers.

        Raises:
            MCPConnectionError: the server could not be started or did not answer.
        """
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self.connected and self.info is not None:
                return self.info
            await self._teardown()
            self.status = "starting"
            self.error = None
            loop = asyncio.get_running_loop()
            self.loop = loop
            ready: asyncio.Future[ConnectInfo] = loop.create_future()
            self._stop = asyncio.Event()
            self._new_stderr()
            self._task = loop.create_task(self._serve(ready, self._stop), name=f"mcp-{self.server.name}")
            try:
                info = await asyncio.wait_for(asyncio.shield(ready), self.server.startup_timeout)
            except asyncio.TimeoutError:
                await self._teardown()
                raise self._failed(f"did not finish starting within {self.server.startup_timeout:g} s") from None
            except MCPConnectionError as exc:
                await self._teardown()
                self.status, self.error = "failed", str(exc)
                raise
            except asyncio.CancelledError:
                await self._teardown()
                raise
            self.info = info
            self.status = "connected"
            self.generation += 1
            return info

    async def stop(self) -> None:
        """Ends the session and stops the server (the subprocess is terminated if it lingers)."""
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        await self._teardown()
        if self.status != "failed":
            self.status = "stopped"
        self._drop_stderr()

    async def _teardown(self) -> None:
        task, stop = self._task, self._stop
        self._task = self._stop = None
        self._session = None
        if task is None:
            return
        if stop is not None:
            stop.set()
        try:
            # The SDK's exit path closes stdin, waits, then terminates the process tree.
            await asyncio.wait_for(asyncio.shield(task), 15)
        except (asyncio.TimeoutError, Exception):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def _new_stderr(self) -> None:
        self._drop_stderr()
        if self.server.transport == "stdio":
            fd, self._stderr_path = tempfile.mkstemp(prefix=f"mcp-{self.server.name}-", suffix=".stderr")
            os.close(fd)

    def _drop_stderr(self) -> None:
        if self._stderr_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._stderr_path)
            self._stderr_path = None

    def _failed(self, what: str, exc: BaseException | None = None) -> MCPConnectionError:
        tail = self.stderr_tail()
        detail = f": {type(exc).__name__}: {exc}" if exc is not None and str(exc) else (f": {type(exc).__name__}" if exc is not None else "")
        message = f"MCP server {self.server.name!r} ({self.server.target}) {what}{detail}"
        if tail:
            message += f"\nIts stderr ends with:\n{tail}"
        self.status, self.error = "failed", message
        return MCPConnectionError(message, self.server.name, tail)

    async def _serve(self, ready: asyncio.Future[ConnectInfo], stop: asyncio.Event) -> None:
        """Holds the transport and session open until ``stop`` is set (one task enters and exits them)."""
        try:
            from mcp.client.session import ClientSession
        except ImportError:
            ready.set_exception(MCPConnectionError(missing_sdk_message(), self.server.name))
            return
        started = time.perf_counter()
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open_transport(stack)
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        elicitation_callback=self._callback(self._elicit),
                        # Declared whenever the hub can answer: the hub then refuses what is not allowed.
                        sampling_callback=self._callback(self._sample),
                    )
                )
                init = await session.initialize()
                tools = await _list_all(session.list_tools, "tools")
                caps = init.capabilities
                resources = await _list_all(session.list_resources, "resources") if caps.resources is not None else []
                prompts = await _list_all(session.list_prompts, "prompts") if caps.prompts is not None else []
                templates = await _list_all(session.list_resource_templates, "resource_templates") if caps.resources is not None else []
                self._session = session
                ready.set_result(
                    ConnectInfo(
                        init.server_info.name,
                        init.server_info.version,
                        str(init.protocol_version),
                        tools,
                        resources,
                        prompts,
                        time.perf_counter() - started,
                        templates,
                    )
                )
                await stop.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:
            cause = _root_cause(exc)
            if not ready.done():
                ready.set_exception(self._start_error(cause))
            elif self.status == "connected":
                self._failed("stopped unexpectedly", cause)
        finally:
            self._session = None

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        server = self.server
        if server.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            command = server.command or ""
            if os.sep not in command and shutil.which(command) is None:
                raise FileNotFoundError(command)
            params = StdioServerParameters(command=command, args=list(server.args), env=dict(server.env) if server.env else None, cwd=server.cwd)
            assert self._stderr_path is not None
            errlog = stack.enter_context(open(self._stderr_path, "a", encoding="utf-8", errors="replace"))
            return await stack.enter_async_context(stdio_client(params, errlog=errlog))
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = await stack.enter_async_context(create_mcp_http_client(headers=dict(server.headers) if server.headers else None))
        return await stack.enter_async_context(streamable_http_client(str(server.url), http_client=client))

    def _start_error(self, cause: BaseException) -> MCPConnectionError:
        server = self.server
        if isinstance(cause, FileNotFoundError) and server.transport == "stdio":
            return self._failed(
                f"could not start: the command {server.command!r} was not found. Install it, or pass its full path "
                f"to MCPServer.stdio({server.name!r}, ...)"
            )
        if isinstance(cause, PermissionError) and server.transport == "stdio":
            return self._failed(f"could not start: {server.command!r} is not executable", cause)
        name = type(cause).__name__
        if server.transport == "http" and ("Connect" in name or isinstance(cause, (ConnectionError, OSError))):
            return self._failed("refused the connection; check that the server is running and the URL is right", cause)
        return self._failed("failed to start", cause)

    def _callback(self, answer: Callable[[MCPServer, Any], Awaitable[Any]] | None) -> Any:
        """An SDK request callback (elicitation, sampling) that passes the request to ``answer``."""
        if answer is None:
            return None

        async def callback(context: Any, params: Any) -> Any:
            return await answer(self.server, params)

        return callback

    # -- use --------------------------------------------------------------------------------

    async def call_tool(self, name: str, arguments: dict[str, Any], progress: Progress | None = None) -> Any:
        """Calls tool ``name`` and returns the SDK's ``CallToolResult``.

        Raises:
            MCPConnectionError: the server is not connected or went away during the call.
        """
        session = self._session
        if session is None:
            raise self._failed(f"is not connected ({self.error or self.status})")
        try:
            return await session.call_tool(name, arguments, progress_callback=progress)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._task is None or self._task.done() or _is_disconnect(exc):
                error = self._failed("went away during the call", exc)
                await self._teardown()
                raise error from exc
            raise

    async def read_resource(self, uri: str) -> Any:
        """Reads one resource (``ReadResourceResult``)."""
        if self._session is None:
            raise self._failed("is not connected")
        return await self._session.read_resource(uri)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> Any:
        """Renders prompt ``name`` with ``arguments`` (``GetPromptResult``)."""
        if self._session is None:
            raise self._failed("is not connected")
        return await self._session.get_prompt(name, arguments or None)


def _is_disconnect(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "connection closed" in text or isinstance(exc, (ConnectionError, EOFError)) or "closed" in type(exc).__name__.lower()


async def _list_all(method: Callable[..., Awaitable[Any]], attribute: str) -> list[Any]:
    """Every page of a list call (``tools``, ``resources``, ``prompts``)."""
    from mcp import types

    items: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):  # a server that never stops paging must not hang the start
        result = await method(params=types.PaginatedRequestParams(cursor=cursor)) if cursor else await method()
        items.extend(getattr(result, attribute))
        cursor = getattr(result, "next_cursor", None)
        if not cursor:
            break
    return items
