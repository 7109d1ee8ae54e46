"""runtime — the loop (``tt``) and what it runs on: state, streaming, the emitter, hooks and the
tool-calling pipeline."""

from __future__ import annotations

from agent_kernel.runtime._config import LoopConfig
from agent_kernel.runtime._emitter import Emitter
from agent_kernel.runtime._hooks import HookContext, HookPoint, Hooks
from agent_kernel.runtime._loop import tt
from agent_kernel.runtime._state import CancelToken, ExecutionContext, LoopState, LoopStats, TerminationReason

__all__ = [
    "CancelToken",
    "Emitter",
    "ExecutionContext",
    "HookContext",
    "HookPoint",
    "Hooks",
    "LoopConfig",
    "LoopState",
    "LoopStats",
    "TerminationReason",
    "tt",
]
