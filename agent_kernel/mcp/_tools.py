"""mcp.tools — ``MCPTool``: one tool of an MCP server, offered to the model as ``mcp__<server>__<tool>``.

The server's JSON schema is offered as is and checked with ``jsonschema`` before a call goes out
(a model's arguments are hostile input); a schema that is not a valid JSON schema of an object
makes the tool unusable, and the hub skips it with a warning event. MCP annotations map onto the
tool's flags: ``readOnlyHint`` makes it read-only, read-only and ``idempotentHint`` make it
concurrency-safe, and every hint (``destructiveHint`` included) goes on the approval card.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticCustomError, ValidationError
from typing_extensions import TypedDict

from agent_kernel.errors import ToolError
from agent_kernel.mcp._content import result_text
from agent_kernel.tools._tool import Tool, ToolContext

if TYPE_CHECKING:
    from agent_kernel.mcp._hub import MCPHub

__all__ = ["MCPTool", "McpApprovalInfo", "SchemaProblem", "tool_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: Longest tool name the providers accept.
MAX_TOOL_NAME = 64


class McpApprovalInfo(TypedDict):
    """What an MCP tool's approval card shows beside the call (these keys of ``approval_required``)."""

    server: str
    mcp_tool: str
    destructive: bool
    read_only: bool


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


def _validator(schema: Any) -> Any:
    import jsonschema  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    if not isinstance(schema, dict):
        raise SchemaProblem(f"its input schema is {type(schema).__name__}, not a JSON object")
    if schema.get("type", "object") != "object":
        raise SchemaProblem(f"its input schema has type {schema.get('type')!r}; tool arguments must be an object")
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaProblem(f"its input schema is not a valid JSON schema: {exc.message}") from None
    return cls(schema)


class MCPTool(Tool):
    """A tool served by an MCP server; calls go through the agent's ``MCPHub``.

    Attributes:
        server: the server's name.
        remote_name: the tool's name on the server.
        annotations: the server's hints (``read_only``, ``destructive``, ``idempotent``, ``open_world``).
        permission_mode: the server's permission mode, or None for the agent's.
    """

    def __init__(self, hub: MCPHub, server: str, remote: Any, permission_mode: str | None = None,
                 timeout: float | None = None) -> None:
        self._hub = hub
        self.server = server
        self.remote_name = str(remote.name)
        schema = remote.input_schema
        self._checker = _validator(schema)
        self.function = self._call
        self.name = tool_name(server, self.remote_name)
        self.description = remote.description or getattr(remote, "title", None) or self.remote_name
        self.parameters = dict(schema)
        hints = remote.annotations
        self.annotations = {
            "read_only": getattr(hints, "read_only_hint", None),
            "destructive": getattr(hints, "destructive_hint", None),
            "idempotent": getattr(hints, "idempotent_hint", None),
            "open_world": getattr(hints, "open_world_hint", None),
        }
        self.read_only = bool(self.annotations["read_only"])
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
        if destructive is None:
            destructive = not self.read_only
        return McpApprovalInfo(server=self.server, mcp_tool=self.remote_name, destructive=bool(destructive), read_only=self.read_only)

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

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Calls the tool on its server; an error result or a dead server raises ``ToolError``."""
        return await self._call(context=context, **arguments)

    async def _call(self, context: ToolContext | None = None, **arguments: Any) -> str:
        caller = asyncio.get_running_loop()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            if context is None:
                return
            fraction = done / total if total else None
            text = message or (f"{done:g}/{total:g}" if total else f"{done:g}")
            # Progress arrives on the MCP runtime's thread; the loop's emitter belongs to the caller's.
            caller.call_soon_threadsafe(context.progress, text, fraction)

        result = await self._hub.call_tool(self.server, self.remote_name, arguments, progress, context)
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(text or f"{self.name} reported an error with no message.")
        return text
