"""context — token accounting, context assembly, micro-compaction and auto-compaction."""

from __future__ import annotations

from .assembler import Assembly, Component, ContextAssembler, Placed, Priority
from .compaction import SECTIONS, CompactionResult, Compactor, compacted_history
from .manager import ContextManager, PreparedContext
from .micro import MicroCompactor, MicroResult
from .tokens import TokenCounter

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
