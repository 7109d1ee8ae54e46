"""team — agents working together: sub-agents a lead delegates to, and crews of tasks."""

from __future__ import annotations

from agent_kernel.team._crew import Crew, CrewResult, Outcomes, Task, TaskOutput
from agent_kernel.team._subagents import Subagent, SubagentResult

__all__ = ["Crew", "CrewResult", "Outcomes", "Subagent", "SubagentResult", "Task", "TaskOutput"]
