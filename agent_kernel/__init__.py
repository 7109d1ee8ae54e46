"""agent_kernel — run, watch, steer and study LLM agents in Jupyter.

The core (``Agent``, ``tt``, events, tools, models, journal) runs in plain Python; the Jupyter
surfaces load only through ``%load_ext agent_kernel`` or ``agent_kernel.jupyter``.
"""

from __future__ import annotations

from typing import Any

from agent_kernel import _moved
from agent_kernel._util import VERSION as __version__  # noqa: F401 (the package version, by convention)
from agent_kernel.agent import Agent, RunResult
from agent_kernel.errors import AgentKernelError, ModelError, RunCancelled, StopRun, ToolError, UserError
from agent_kernel.events import AgentEvent, EventType, TurnState
from agent_kernel.guard import Approval, ApprovalBroker, ApprovalRequest, Permissions
from agent_kernel.messages import Message
from agent_kernel.runtime import ExecutionContext, HookContext, HookPoint, Hooks, LoopState, LoopStats, TerminationReason, tt
from agent_kernel.team import Crew, CrewResult, Subagent, Task, TaskOutput
from agent_kernel.tools import Tool, ToolContext, ToolResult, tool

_moved.install()


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
    "ToolResult",
    "TurnState",
    "UserError",
    "load_ipython_extension",
    "tool",
    "tt",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext agent_kernel``: registers the ``%%agent`` and ``%agent`` magics."""
    from agent_kernel.jupyter._extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext agent_kernel``: removes the magics and cancels a run in progress."""
    from agent_kernel.jupyter._extension import unload_ipython_extension as unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the package's prebuilt front-end extension (``jupyter labextension develop``)."""
    return [{"src": "_labextension", "dest": "agent-kernel-live"}]
