"""permissions — whether a tool call may run: modes, rules, approvers and the approval broker.

The loop calls ``gate.authorize(request, emit)`` for every tool call before it runs. This module
owns everything behind that call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .events import EventType
from .tools.tool import Tool

__all__ = ["Authorization", "PermissionGate", "ToolRequest"]

Emit = Callable[[EventType, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """One tool call awaiting authorization."""

    call_id: str
    tool: Tool
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Authorization:
    """The verdict on a tool call.

    Attributes:
        allowed: whether it runs.
        arguments: the arguments to run it with (a person may have edited them).
        message: when refused, the reason the model sees as the tool's error result.
        decided_by: ``rule``, ``mode``, ``callback``, ``policy`` or ``person``.
    """

    allowed: bool
    arguments: dict[str, Any]
    message: str | None = None
    decided_by: str = "rule"


class PermissionGate(Protocol):
    """Decides tool calls; emits ``approval_required`` / ``approval_decision`` through ``emit``."""

    async def authorize(self, request: ToolRequest, emit: Emit) -> Authorization:
        """Returns the verdict for ``request``, asking someone if the rules say so."""
        ...
