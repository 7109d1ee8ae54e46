"""mcp.tools — ``MCPTool``: one tool of an MCP server, offered to the model as ``mcp__<server>__<tool>``.

The server's JSON schema is offered and checked with ``jsonschema`` before a call goes out (a
model's arguments are hostile input); a schema that says nothing about other properties gets
``additionalProperties: false``, so an argument the server did not declare is refused before the
call is judged, never passed on unjudged. A schema that is not a valid JSON schema of an object
makes the tool unusable, and the hub skips it with a warning event. The call the gate judges has
the schema's top-level defaults filled in, as the server would fill them.

MCP annotations are the server's claims. They count only for a server the person marked
``trusted=True``: then ``readOnlyHint`` makes a tool read-only, and read-only with
``idempotentHint`` makes it concurrency-safe. An untrusted server's tools are judged as writes
(``plan`` mode refuses them, ``default`` asks) whatever they claim; every hint still goes on the
approval card, as a claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticCustomError, ValidationError
from typing_extensions import TypedDict

from agent_kernel.errors import ToolError
from agent_kernel.mcp._content import result_text
from agent_kernel.tools._tool import Tool, ToolContext

if TYPE_CHECKING:
    from agent_kernel.mcp._hub import MCPHub

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: Longest tool name the providers accept.
MAX_TOOL_NAME = 64


class McpApprovalInfo(TypedDict):
    """What an MCP tool's approval card shows beside the call (these keys of ``approval_required``)."""

    server: str
    mcp_tool: str
    destructive: bool
    read_only: bool
    claims_read_only: bool  # what the server's readOnlyHint says (counted only when trusted)
    trusted: bool  # the person marked the server trusted (MCPServer(..., trusted=True))


class SchemaProblem(ValueError):
    """A tool a server lists cannot be offered (malformed schema, unusable name)."""


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters providers refuse replaced by ``_``.

    Raises:
        SchemaProblem: the name would be longer than providers accept.
    """
    name = f"mcp__{server}__{_UNSAFE.sub('_', tool)}"
    if len(name) > MAX_TOOL_NAME:
        raise SchemaProblem(f"its name {name!r} is longer than the {MAX_TOOL_NAME} characters model providers accept")
    return name


#: Schema keywords by which a server says what it accepts beyond ``properties``.
_OPEN_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``additionalProperties: false`` unless it already says what else it accepts."""
    if any(k in schema for k in _OPEN_KEYWORDS) or any(k in schema for k in ("allOf", "anyOf", "oneOf", "$ref")):
        return dict(schema)  # combined schemas: closing the top would refuse what a branch allows
    return {**schema, "additionalProperties": False}


def _validator(schema: Any) -> Any:
    import jsonschema  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    if not isinstance(schema, dict):
        raise SchemaProblem(f"its input schema is {type(schema).__name__}, not a JSON object")
    schema = closed(schema)
    if schema.get("type", "object") != "object":
        raise SchemaProblem(f"its input schema has type {schema.get('type')!r}; tool arguments must be an object")
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaProblem(f"its input schema is not a valid JSON schema: {exc.message}") from None
    return cls(schema)


#: At most this many progress events a second per call: a server may send thousands.
PROGRESS_PER_SECOND = 4


class _Coalescer:
    """Passes a call's progress on at most ``PROGRESS_PER_SECOND`` times a second, keeping the latest.

    Notifications arrive on the MCP runtime's thread; the report function belongs to the
    caller's loop, so everything is handed over with ``call_soon_threadsafe``. One that arrives
    too soon after the last is held and sent when its time comes (replaced by any newer one);
    what is still held when the call ends is sent then, so the last progress is always shown.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, report: Any) -> None:
        self._loop = loop
        self._report = report
        self._lock = threading.Lock()
        self._last = -1.0
        self._held: tuple[str, float | None] | None = None
        self._timer_set = False
        self._closed = False

    def __call__(self, text: str, fraction: float | None) -> None:
        if self._report is None:
            return
        gap = 1.0 / PROGRESS_PER_SECOND
        with self._lock:
            if self._closed:
                return
            now = time.monotonic()
            if now - self._last >= gap and not self._timer_set:
                self._last = now
                self._send(text, fraction)
                return
            self._held = (text, fraction)
            if self._timer_set:
                return
            self._timer_set = True
            wait = max(0.0, self._last + gap - now)
        with contextlib.suppress(RuntimeError):  # the caller's loop has closed
            self._loop.call_soon_threadsafe(self._loop.call_later, wait, self._flush)

    def _send(self, text: str, fraction: float | None) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._report, text, fraction)

    def _flush(self) -> None:
        with self._lock:
            self._timer_set = False
            held, self._held = self._held, None
            if held is None or self._closed:
                return
            self._last = time.monotonic()
        self._report(*held)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            held, self._held = self._held, None
        if held is not None and self._report is not None:
            self._report(*held)  # on the caller's loop: close runs there


class MCPTool(Tool):
    """A tool served by an MCP server; calls go through the agent's ``MCPHub``.

    Attributes:
        server: the server's name.
        remote_name: the tool's name on the server.
        annotations: the server's hints (``read_only``, ``destructive``, ``idempotent``, ``open_world``).
        permission_mode: the server's permission mode, or None for the agent's.
    """

    def __init__(self, hub: MCPHub, server: str, remote: Any, permission_mode: str | None = None,
                 timeout: float | None = None, trusted: bool = False) -> None:
        self._hub = hub
        self.server = server
        self.remote_name = str(remote.name)
        schema = remote.input_schema
        self._checker = _validator(schema)
        self.function = self._call
        self.name = tool_name(server, self.remote_name)
        self.description = remote.description or getattr(remote, "title", None) or self.remote_name
        self.parameters = closed(schema)
        self.trusted = trusted
        hints = remote.annotations
        self.annotations = {
            "read_only": getattr(hints, "read_only_hint", None),
            "destructive": getattr(hints, "destructive_hint", None),
            "idempotent": getattr(hints, "idempotent_hint", None),
            "open_world": getattr(hints, "open_world_hint", None),
        }
        # A claim counts only from a server the person trusts; otherwise the tool is judged a write.
        self.read_only = trusted and bool(self.annotations["read_only"])
        self.concurrency_safe = self.read_only and bool(self.annotations["idempotent"])
        self.timeout = timeout  # the server's call_timeout: the tool invoker cancels the call past it
        self.category = "mcp"
        self.permission_key = None
        self.permission_mode = permission_mode
        self.is_async = True
        self._context_param = None  # invoke passes the context itself

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.server!r})"

    @property
    def approval_info(self) -> McpApprovalInfo:
        """What the approval card shows beside the call: the server, the tool and its hints."""
        # The MCP spec's default for destructiveHint is true when the tool is not read-only.
        destructive = self.annotations["destructive"]
        if destructive is None or not self.trusted:  # an untrusted server's "not destructive" is not believed
            destructive = not self.read_only
        return McpApprovalInfo(server=self.server, mcp_tool=self.remote_name, destructive=bool(destructive), read_only=self.read_only,
                               claims_read_only=bool(self.annotations["read_only"]), trusted=self.trusted)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Checks ``arguments`` against the server's schema; raises ``pydantic.ValidationError``."""
        errors = sorted(self._checker.iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            raise ValidationError.from_exception_data(
                self.name,
                [
                    {
                        "type": PydanticCustomError("mcp_schema", "{message}", {"message": e.message}),
                        "loc": tuple(e.path) or ("arguments",),
                        "input": e.instance,
                    }
                    for e in errors[:5]
                ],
            )
        return dict(arguments)

    def judged(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The checked ``arguments`` with the schema's top-level defaults filled in (what the gate judges)."""
        checked = self.validate(arguments)
        properties = self.parameters.get("properties")
        if isinstance(properties, dict):
            for name, spec in properties.items():
                if name not in checked and isinstance(spec, dict) and "default" in spec:
                    checked[name] = spec["default"]
        return checked

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Calls the tool on its server; an error result or a dead server raises ``ToolError``."""
        return await self._call(context=context, **arguments)

    async def _call(self, context: ToolContext | None = None, **arguments: Any) -> str:
        caller = asyncio.get_running_loop()
        coalesce = _Coalescer(caller, context.progress if context is not None else None)

        async def progress(done: float, total: float | None, message: str | None) -> None:
            fraction = done / total if total else None
            text = message or (f"{done:g}/{total:g}" if total else f"{done:g}")
            coalesce(text, fraction)

        try:
            result = await self._hub.call_tool(self.server, self.remote_name, arguments, progress, context)
        finally:
            coalesce.close()
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(text or f"{self.name} reported an error with no message.")
        return text
