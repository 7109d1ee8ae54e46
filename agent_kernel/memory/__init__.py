"""memory — the agent's memory in three tiers, its session memory, and system reminders.

See ``memory.agent_memory`` (``agent.memory``) for the tiers, ``memory.session`` for what
survives a compaction, ``memory.reminders`` for what the agent is told before each prompt, and
docs/memory.md for the whole picture.
"""

from __future__ import annotations

from .agent_memory import AgentMemory
from .namespace import NamespaceWatcher, describe
from .reminders import Reminder, Reminders
from .session import SessionMemory, SessionMemoryConfig, SessionSummary, TodoItem
from .startup import StartupMemory
from .store import MemoryCorruptWarning, MemoryEntry, MemoryStore
from .summaries import Summary

__all__ = [
    "AgentMemory",
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
