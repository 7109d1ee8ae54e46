"""agent_kernel — run, watch, steer and study LLM agents in Jupyter.

The core (``Agent``, ``tt``, events, tools, models, journal) runs in plain Python; the Jupyter
surfaces load only through ``%load_ext agent_kernel`` or ``agent_kernel.jupyter``.
"""

from __future__ import annotations

from typing import Any

from .agent import Agent, RunResult
from .approvals import Approval, ApprovalBroker, ApprovalRequest
from .crew import Crew, CrewResult, Task, TaskOutput
from .errors import AgentKernelError, ModelError, RunCancelled, StopRun, ToolError, UserError
from .events import AgentEvent, EventType
from .hooks import HookContext, HookPoint, Hooks
from .loop import tt
from .messages import Message
from .permissions import Permissions
from .state import ExecutionContext, LoopState, LoopStats, TerminationReason, TurnState
from .subagents import Subagent
from .tools.tool import Tool, ToolContext, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentKernelError",
    "Approval",
    "ApprovalBroker",
    "ApprovalRequest",
    "Crew",
    "CrewResult",
    "EventType",
    "ExecutionContext",
    "HookContext",
    "HookPoint",
    "Hooks",
    "LoopState",
    "LoopStats",
    "Message",
    "ModelError",
    "Permissions",
    "RunCancelled",
    "RunResult",
    "StopRun",
    "Subagent",
    "Task",
    "TaskOutput",
    "TerminationReason",
    "Tool",
    "ToolContext",
    "ToolError",
    "TurnState",
    "UserError",
    "load_ipython_extension",
    "tool",
    "tt",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext agent_kernel``: registers the ``%%agent`` and ``%agent`` magics."""
    from .jupyter.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext agent_kernel``: removes the magics and cancels a run in progress."""
    from .jupyter.extension import unload_ipython_extension as unload

    unload(ipython)
