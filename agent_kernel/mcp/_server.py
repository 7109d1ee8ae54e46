"""mcp.server — ``MCPServer``: how to reach one Model Context Protocol server (stdio or HTTP).

An ``MCPServer`` is configuration only: nothing starts when it is built. An agent given
``Agent(mcp=[...])`` starts each server on its first run, lists its tools and offers them to the
model as ``mcp__<server>__<tool>``; ``agent.close()`` (or leaving ``with agent:``) stops the
servers it started.

Per-server permissions: ``permissions=`` takes a mode that replaces the agent's mode for this
server's tools (``"bypass"`` runs them all without asking, ``"plan"`` refuses those that are not
read-only, ``"default"`` asks about those that are not read-only). Rules still come first
(``deny=["mcp__git__git_commit"]`` wins over a bypassed server), and an agent in ``plan`` mode
stays read-only whatever a server's mode says.

Sampling (the server asking the agent's model for a completion) is refused unless
``sampling=True`` allows it for that server, or the approval policy (``AGENT_KERNEL_APPROVAL``)
has an entry naming ``mcp__<server>__sampling`` itself (a glob such as ``mcp__<server>__*`` is
about the server's tools and does not approve sampling; neither does ``auto_approve``). Each run
answers at most ``max_samplings`` requests of a server, spending at most ``max_sampling_tokens``
tokens on them; each request is recorded as an ``mcp_sampling`` event.
"""

from __future__ import annotations

import os
import re
import shlex
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agent_kernel.errors import UserError
from agent_kernel.guard._permissions import MODES

# Provider tool names allow [A-Za-z0-9_-]{1,64}; the server name becomes part of each tool's name.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def tool_prefix(server: str) -> str:
    """The prefix of every tool of ``server``: ``mcp__<server>__``."""
    return f"mcp__{server}__"


@dataclass(frozen=True)
class MCPServer:
    """One MCP server an agent may use. Build it with ``MCPServer.stdio`` or ``MCPServer.http``.

    Attributes:
        name: a short name; tools appear as ``mcp__<name>__<tool>``.
        transport: ``"stdio"`` (a subprocess) or ``"http"`` (streamable HTTP).
        command: the program to run (stdio).
        args: its arguments (stdio).
        env: extra environment variables for the subprocess (stdio).
        cwd: the subprocess's working directory (stdio).
        url: the endpoint (http).
        headers: extra HTTP headers, e.g. ``Authorization`` (http).
        permissions: a permission mode for this server's tools, or None for the agent's mode.
        startup_timeout: seconds to connect and list tools before the start counts as failed.
        call_timeout: seconds one tool call may take; past it the call is cancelled (the server is
            sent the MCP cancellation) and the model reads that it timed out. None: no limit.
        sampling: the server may ask the agent's model for completions without asking anyone.
        max_samplings: sampling requests of this server one run answers at most (then declined).
        max_sampling_tokens: tokens (prompt and answer) those requests may spend in one run; a
            request's ``maxTokens`` is lowered to what is left.
        trusted: the person vouches for the server's tool annotations: its ``readOnlyHint`` makes a
            tool read-only (runs unasked in ``default`` mode, allowed in ``plan`` mode). Untrusted
            (the default), every tool of the server is judged as one that changes things.
    """

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    permissions: str | None = None
    startup_timeout: float = 60.0
    sampling: bool = False
    call_timeout: float | None = None
    trusted: bool = False
    max_samplings: int = 20
    max_sampling_tokens: int = 50_000

    def __post_init__(self) -> None:
        for limit in ("max_samplings", "max_sampling_tokens"):
            value = getattr(self, limit)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserError(f"{limit}={value!r} for MCP server {self.name!r} must be a whole number, 0 or more (0: none).")
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise UserError(
                f"{self.name!r} is not a valid MCP server name: use 1 to 32 letters, digits, '_' or '-' "
                "(it becomes part of each tool's name, mcp__<server>__<tool>)."
            )
        if self.permissions is not None and self.permissions not in MODES:
            raise UserError(f"permissions={self.permissions!r} for MCP server {self.name!r} is not a mode; use one of {', '.join(MODES)}.")
        if self.call_timeout is not None and (isinstance(self.call_timeout, bool) or not isinstance(self.call_timeout, (int, float)) or self.call_timeout <= 0):
            raise UserError(f"call_timeout={self.call_timeout!r} for MCP server {self.name!r} must be a positive number of seconds or None.")
        if self.transport == "stdio" and not self.command:
            raise UserError(f"MCP server {self.name!r} needs a command to run, e.g. MCPServer.stdio({self.name!r}, 'python', '-m', 'mcp_server_time').")
        if self.transport == "http" and not (isinstance(self.url, str) and self.url.startswith(("http://", "https://"))
                                             and urllib.parse.urlsplit(self.url).hostname):
            raise UserError(f"MCP server {self.name!r}: {self.url!r} is not an http:// or https:// URL with a host, "
                            "such as http://127.0.0.1:3001/mcp.")

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        permissions: str | None = None,
        startup_timeout: float = 60.0,
        sampling: bool = False,
        call_timeout: float | None = None,
        trusted: bool = False,
        max_samplings: int = 20,
        max_sampling_tokens: int = 50_000,
    ) -> MCPServer:
        """A server run as a subprocess, spoken to over its stdin and stdout.

        Example:
            >>> MCPServer.stdio("time", "python", "-m", "mcp_server_time").target
            'python -m mcp_server_time'
        """
        return cls(
            name,
            "stdio",
            command=str(command),
            args=tuple(str(a) for a in args),
            env=dict(env) if env is not None else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
            permissions=permissions,
            startup_timeout=startup_timeout,
            sampling=sampling,
            call_timeout=call_timeout,
            trusted=trusted,
            max_samplings=max_samplings,
            max_sampling_tokens=max_sampling_tokens,
        )

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        permissions: str | None = None,
        startup_timeout: float = 60.0,
        sampling: bool = False,
        call_timeout: float | None = None,
        trusted: bool = False,
        max_samplings: int = 20,
        max_sampling_tokens: int = 50_000,
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:3001/mcp``).

        Example:
            >>> MCPServer.http("docs", "http://127.0.0.1:3001/mcp").transport
            'http'
        """
        return cls(
            name, "http", url=url, headers=dict(headers) if headers is not None else None, permissions=permissions,
            startup_timeout=startup_timeout, sampling=sampling, call_timeout=call_timeout, trusted=trusted,
            max_samplings=max_samplings, max_sampling_tokens=max_sampling_tokens,
        )

    @property
    def target(self) -> str:
        """The command line or URL, for messages and events."""
        if self.transport == "stdio":
            return shlex.join([self.command or "", *self.args])
        return str(self.url)

    @property
    def prefix(self) -> str:
        """``mcp__<name>__``, the prefix of this server's tools."""
        return tool_prefix(self.name)
