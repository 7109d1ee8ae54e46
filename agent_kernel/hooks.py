"""hooks — the nine lifecycle hook points of the loop, and the registry that calls them.

A hook is a function (sync or async) taking a ``HookContext``. It may inspect the turn, change
nothing, or end the run by raising ``StopRun``. Hooks run in registration order.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from .state import ExecutionContext, TurnState

__all__ = ["HookContext", "HookPoint", "Hooks"]


class HookPoint(str, Enum):
    """Where in one recursion a hook runs."""

    BEFORE_ITERATION_START = "before_iteration_start"
    BEFORE_CONTEXT_ASSEMBLY = "before_context_assembly"
    AFTER_CONTEXT_ASSEMBLY = "after_context_assembly"
    BEFORE_LLM_CALL = "before_llm_call"
    AFTER_LLM_RESPONSE = "after_llm_response"
    BEFORE_TOOL_EXECUTION = "before_tool_execution"
    AFTER_TOOL_EXECUTION = "after_tool_execution"
    BEFORE_RECURSION = "before_recursion"
    AFTER_ITERATION_END = "after_iteration_end"

    def __str__(self) -> str:
        return self.value


@dataclass
class HookContext:
    """What a hook sees: the point, the turn, the run context and point-specific ``data``."""

    point: HookPoint
    turn_state: TurnState
    context: ExecutionContext
    data: dict[str, Any] = field(default_factory=dict)


HookFunction = Callable[[HookContext], Union[None, Awaitable[None]]]


class Hooks:
    """Hook functions by point.

    Example:
        >>> hooks = Hooks()
        >>> @hooks.on("before_llm_call")
        ... def log(ctx): print(ctx.turn_state.turn_counter)
    """

    def __init__(self) -> None:
        self._by_point: dict[HookPoint, list[HookFunction]] = {}

    def on(self, point: HookPoint | str, function: HookFunction | None = None) -> Any:
        """Registers ``function`` at ``point``; usable as a decorator."""
        hp = HookPoint(point)

        def register(fn: HookFunction) -> HookFunction:
            self._by_point.setdefault(hp, []).append(fn)
            return fn

        return register(function) if function is not None else register

    def __bool__(self) -> bool:
        return bool(self._by_point)

    def has(self, point: HookPoint) -> bool:
        """True if any hook is registered at ``point``."""
        return point in self._by_point

    async def run(self, point: HookPoint, turn_state: TurnState, context: ExecutionContext, **data: Any) -> None:
        """Calls the hooks at ``point``; a ``StopRun`` they raise propagates to the loop."""
        functions = self._by_point.get(point)
        if not functions:
            return
        hc = HookContext(point, turn_state, context, data)
        for fn in functions:
            result = fn(hc)
            if inspect.isawaitable(result):
                await result
