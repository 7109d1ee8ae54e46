"""memory — the agent's memory in three tiers, its session memory, and system reminders.

``agent.memory`` (``agent_kernel.agent.AgentMemory``) joins the tiers for one agent; here are the
parts: the long-term store, session memory (what survives a compaction) and the reminders (what
the agent is told before each prompt). docs/memory.md has the whole picture.
"""

from __future__ import annotations

from agent_kernel.memory._namespace import NamespaceWatcher, describe
from agent_kernel.memory._reminders import Reminder, Reminders
from agent_kernel.memory._session import SessionMemory, SessionMemoryConfig, SessionSummary, TodoItem
from agent_kernel.memory._startup import StartupMemory
from agent_kernel.memory._store import MemoryCorruptWarning, MemoryEntry, MemoryStore
from agent_kernel.memory._summaries import Summary

__all__ = [
    "MemoryCorruptWarning",
    "MemoryEntry",
    "MemoryStore",
    "NamespaceWatcher",
    "Reminder",
    "Reminders",
    "SessionMemory",
    "SessionMemoryConfig",
    "SessionSummary",
    "StartupMemory",
    "Summary",
    "TodoItem",
    "describe",
]
