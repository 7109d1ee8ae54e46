"""tools — ``Tool`` and ``@tool``, the registry, and the built-in tools (``tools.builtin``)."""

from __future__ import annotations

from agent_kernel.tools._registry import BUILTIN_TOOLS, ToolRegistry, as_tool
from agent_kernel.tools._tool import Tool, ToolContext, ToolResult, tool

__all__ = ["BUILTIN_TOOLS", "Tool", "ToolContext", "ToolRegistry", "ToolResult", "as_tool", "tool"]
