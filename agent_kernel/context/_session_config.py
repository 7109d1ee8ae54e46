"""context.session_config — ``SessionMemoryConfig``: what a compaction restores, and whether a
running session-memory summary is kept.

It lives with the context manager that takes it (``ContextManager(session_memory=...)``); the
memory layer above (``agent_kernel.memory``) does the restoring and re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_kernel.errors import UserError


@dataclass(frozen=True)
class SessionMemoryConfig:
    """What survives a compaction, and whether a running summary is kept.

    Attributes:
        restore: after every compaction, add the todo list and the recently read files.
        budget_tokens: tokens the restored block may take: the todo list and the files together
            (50,000).
        per_file_tokens: tokens one restored file may take; a longer one is cut (10,000).
        summary: keep a session-memory summary up to date between turns (a model call each
            time the conversation grows by ``update_tokens``), so a compaction can use it
            instead of a fresh summary call. Off by default: it spends tokens.
        update_tokens: growth of the conversation, in estimated tokens, between two updates.

    Example:
        >>> from agent_kernel.context import ContextManager
        >>> manager = ContextManager(session_memory=SessionMemoryConfig(summary=True, budget_tokens=20_000))
    """

    restore: bool = True
    budget_tokens: int = 50_000
    per_file_tokens: int = 10_000
    summary: bool = False
    update_tokens: int = 5_000

    def __post_init__(self) -> None:
        for name in ("budget_tokens", "per_file_tokens", "update_tokens"):
            if getattr(self, name) < 0:
                raise UserError(f"SessionMemoryConfig({name}=...) must be 0 or more, got {getattr(self, name)}.")
