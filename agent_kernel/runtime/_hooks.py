"""hooks — the nine lifecycle hook points of the loop, and the registry that calls them.

A hook is a function (sync or async) taking a ``HookContext``. It may inspect the turn, end the
run by raising ``StopRun``, or act by returning a value where its point allows one:

* ``before_llm_call``: a ``ModelRequest`` (sent instead of the prepared one) or a list of
  ``Message`` (sent as the request's messages). The conversation itself is left as it was; the
  next hook sees the replacement.
* ``before_tool_execution``: a ``Decision``. ``Decision.reject(reason)`` stops the call before it
  runs; the model reads the reason as the call's result.
* ``after_context_assembly``: a ``str``, extra context added to this turn's request as a marked
  block (``HOOK_CONTEXT_TAG``) at the end of the last user message.

Returning None changes nothing, and at the other points a returned value is ignored; a value
of another type at one of these three points is a mistake, reported as a ``HookError``. A hook that raises anything but ``StopRun`` ends the run with
an ``error`` event of kind ``hook``. Hooks run in registration order.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from agent_kernel.errors import AgentKernelError, StopRun

if TYPE_CHECKING:
    from agent_kernel.events._turn import TurnState
    from agent_kernel.runtime._state import ExecutionContext

#: The tag around extra context a hook adds to a request: ``<hook-context>...</hook-context>``.
HOOK_CONTEXT_TAG = "hook-context"


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


class HookError(AgentKernelError):
    """A hook or a state callback raised, or returned something its point does not take.

    The loop ends the run with an ``error`` event of kind ``hook`` carrying this message.
    """


@dataclass(frozen=True)
class Decision:
    """What a ``before_tool_execution`` hook decides about a call.

    Attributes:
        approved: False stops the call before it runs.
        reason: why; for a rejection, the text the model reads as the call's result.

    Example:
        >>> Decision.reject("no network calls today").approved
        False
    """

    approved: bool
    reason: str = ""

    @classmethod
    def approve(cls, reason: str = "") -> Decision:
        """Lets the call run (later hooks and the tool still run)."""
        return cls(True, reason)

    @classmethod
    def reject(cls, reason: str) -> Decision:
        """Stops the call; the model reads ``reason``."""
        return cls(False, reason)


@dataclass
class HookContext:
    """What a hook sees: the point, the turn, the run context and point-specific ``data``.

    ``data`` holds ``request`` (a ``ModelRequest``) at the context and LLM points, ``message`` after
    the response, ``call`` (and ``result`` after) at the tool points. At ``before_llm_call`` the
    request is the one the earlier hooks left.
    """

    point: HookPoint
    turn_state: TurnState
    context: ExecutionContext
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class HookOutcome:
    """What the hooks at one point asked for (``Hooks.run`` returns it).

    Attributes:
        request: the replacement request (``before_llm_call``), or None to keep the prepared one.
        decision: the first rejection (``before_tool_execution``), else the last approval, else None.
        context: extra context texts (``after_context_assembly``), in registration order.
    """

    request: Any = None
    decision: Decision | None = None
    context: list[str] = field(default_factory=list)


HookFunction = Callable[[HookContext], Any]  # returns None, a value its point takes, or an awaitable of one


class Hooks:
    """Hook functions by point.

    Example:
        >>> hooks = Hooks()
        >>> @hooks.on("before_llm_call")
        ... def log(ctx): print(ctx.turn_state.turn_counter)
        >>> @hooks.on("before_tool_execution")
        ... def no_bash(ctx):
        ...     if ctx.data["call"].name == "bash":
        ...         return Decision.reject("bash is off in this notebook")
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

    async def run(self, point: HookPoint, turn_state: TurnState, context: ExecutionContext, **data: Any) -> HookOutcome:
        """Calls the hooks at ``point`` and gathers what they returned.

        Raises:
            StopRun: a hook ended the run.
            HookError: a hook raised anything else, or returned a value ``point`` does not take.
        """
        outcome = HookOutcome()
        functions = self._by_point.get(point)
        if not functions:
            return outcome
        hc = HookContext(point, turn_state, context, data)
        for fn in functions:
            try:
                result = fn(hc)
                if inspect.isawaitable(result):
                    result = await result
            except StopRun:
                raise
            except Exception as exc:
                raise HookError(f"hook {_name(fn)} at {point} raised {type(exc).__name__}: {exc}") from exc
            if result is not None:
                _apply(outcome, hc, fn, result)
                if outcome.decision is not None and not outcome.decision.approved:
                    break  # a rejection is final: later hooks would judge a call that will not run
        return outcome


def _apply(outcome: HookOutcome, hc: HookContext, fn: HookFunction, result: Any) -> None:
    """Records one hook's return value, or raises ``HookError`` when ``hc.point`` takes no such value."""
    from agent_kernel.messages import Message
    from agent_kernel.models._base import ModelRequest

    point = hc.point
    if point is HookPoint.BEFORE_LLM_CALL and isinstance(result, ModelRequest):
        outcome.request = hc.data["request"] = result
    elif point is HookPoint.BEFORE_LLM_CALL and isinstance(result, (list, tuple)) and all(isinstance(m, Message) for m in result):
        current: ModelRequest = hc.data["request"]
        outcome.request = hc.data["request"] = ModelRequest(tuple(result), current.system, current.tools, current.options)
    elif point is HookPoint.BEFORE_TOOL_EXECUTION and isinstance(result, Decision):
        outcome.decision = result
    elif point is HookPoint.AFTER_CONTEXT_ASSEMBLY and isinstance(result, str):
        if result:
            outcome.context.append(result)
    elif point in _TAKES:
        raise HookError(f"hook {_name(fn)} at {point} returned {type(result).__name__}; a hook there returns None or {_TAKES[point]}.")


# The points where a returned value acts; elsewhere a value (a lambda's) is ignored.
_TAKES = {
    HookPoint.BEFORE_LLM_CALL: "a ModelRequest or a list of Message",
    HookPoint.BEFORE_TOOL_EXECUTION: "a Decision",
    HookPoint.AFTER_CONTEXT_ASSEMBLY: "a str of extra context",
}


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))
