"""agent — the ``Agent`` facade: its settings, runs, resume and fork, memory and ``RunResult``."""

from __future__ import annotations

from agent_kernel.agent._agent import Agent
from agent_kernel.agent._memory import AgentMemory
from agent_kernel.agent._result import RunResult

__all__ = ["Agent", "AgentMemory", "RunResult"]
