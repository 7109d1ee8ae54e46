"""context — token accounting, context assembly, micro-compaction and auto-compaction."""

from __future__ import annotations

from agent_kernel.context._assembler import Assembly, Component, ContextAssembler, Placed, Priority
from agent_kernel.context._compaction import SECTIONS, CompactionResult, Compactor, compacted_history
from agent_kernel.context._manager import ContextManager, PreparedContext
from agent_kernel.context._micro import MicroCompactor, MicroResult
from agent_kernel.context._tokens import TokenCounter

__all__ = [
    "SECTIONS",
    "Assembly",
    "CompactionResult",
    "Compactor",
    "Component",
    "ContextAssembler",
    "ContextManager",
    "MicroCompactor",
    "MicroResult",
    "Placed",
    "PreparedContext",
    "Priority",
    "TokenCounter",
    "compacted_history",
]
