"""agent — the ``Agent`` facade: its settings, runs, resume and fork, memory and ``RunResult``."""

from __future__ import annotations

from agent_kernel.agent._agent import Agent
from agent_kernel.agent._memory import AgentMemory
from agent_kernel.agent._result import RunResult
from agent_kernel.agent._settings import AgentSettings

__all__ = ["Agent", "AgentMemory", "AgentSettings", "RunResult"]
