"""tools.registry — the tools an agent may call, by name; resolves names of built-in tools."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agent_kernel.errors import UnknownTool, did_you_mean
from agent_kernel.models._base import ToolSpec
from agent_kernel.tools._tool import Tool

# name -> "module:attribute", imported on first use.
BUILTIN_TOOLS: dict[str, str] = {
    "read_file": "agent_kernel.tools.builtin._files:read_file",
    "write_file": "agent_kernel.tools.builtin._files:write_file",
    "edit_file": "agent_kernel.tools.builtin._files:edit_file",
    "list_files": "agent_kernel.tools.builtin._search:list_files",
    "glob": "agent_kernel.tools.builtin._search:glob",
    "grep": "agent_kernel.tools.builtin._search:grep",
    "bash": "agent_kernel.tools.builtin._shell:bash",
    "python": "agent_kernel.tools.builtin._python:python",
    "read_notebook": "agent_kernel.tools.builtin._notebook:read_notebook",
    "edit_notebook": "agent_kernel.tools.builtin._notebook:edit_notebook",
    "run_cell": "agent_kernel.tools.builtin._notebook:run_cell",
    "web_fetch": "agent_kernel.tools.builtin._web:web_fetch",
}


def _builtin(name: str) -> Tool:
    module, attr = BUILTIN_TOOLS[name].split(":")
    return getattr(importlib.import_module(module), attr)


def as_tool(obj: Tool | Callable[..., Any] | str) -> Tool:
    """Returns a Tool for a Tool, a plain function, or the name of a built-in tool."""
    if isinstance(obj, Tool):
        return obj
    if isinstance(obj, str):
        if obj in BUILTIN_TOOLS:
            return _builtin(obj)
        if obj == "task":
            raise UnknownTool(
                "The task tool comes with sub-agents: create the agent with Agent(..., subagents={'researcher': Agent(...)}) "
                "or call agent.add_subagent('researcher', Agent(...)), and it is added for you."
            )
        raise UnknownTool(
            f"{obj!r} is not a built-in tool.{did_you_mean(obj, BUILTIN_TOOLS)} "
            f"Built-in tools: {', '.join(sorted(BUILTIN_TOOLS))}. Pass a function or @tool object for your own."
        )
    as_agent_tool = getattr(obj, "as_tool", None)
    if callable(obj) and not isinstance(obj, type):
        return Tool(obj)
    if as_agent_tool is not None:
        return as_agent_tool()
    raise UnknownTool(f"{obj!r} is not a tool; pass a @tool function, a plain function or a built-in tool name.")


class ToolRegistry:
    """An ordered mapping of tool name to ``Tool``."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any] | str] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, obj: Tool | Callable[..., Any] | str) -> Tool:
        """Adds a tool (replacing one of the same name) and returns it."""
        t = as_tool(obj)
        self._tools[t.name] = t
        return t

    def remove(self, name: str) -> Tool | None:
        """Removes the tool called ``name`` (e.g. a stopped MCP server's) and returns it, or None."""
        return self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools as offered to a model."""
        return tuple(t.spec for t in self._tools.values())
