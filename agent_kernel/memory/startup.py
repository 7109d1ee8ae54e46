"""memory.startup — what the agent is told at session start: its long-term memory and AGENTS.md.

At the first run of a session the stored memories and the working directory's ``AGENTS.md`` (when
there is one) are read once and appended to the system prompt in marked blocks (``<memory>``,
``<agents-md>``); a ``memory_loaded`` event records what was loaded and the exact text added.
The block stays the same for the whole session, so a provider's prompt cache keeps working; what
the agent remembers meanwhile it knows from its own tool calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .store import MemoryStore

__all__ = ["AGENTS_FILE", "MAX_AGENTS_CHARS", "MAX_MEMORY_CHARS", "StartupMemory", "load_startup"]

#: The instructions file read from the working directory at session start.
AGENTS_FILE = "AGENTS.md"
#: Characters of AGENTS.md, and of the stored memories, put into the system prompt at most.
MAX_AGENTS_CHARS = 20_000
MAX_MEMORY_CHARS = 20_000


@dataclass(frozen=True)
class StartupMemory:
    """What was loaded at session start.

    Attributes:
        text: the block appended to the system prompt ("" when there was nothing to load).
        keys: the memory keys it lists.
        agents_md: the AGENTS.md read, or None.
        problems: ``{"path", "moved_to", "message"}`` of a memory file found corrupt and moved aside.
    """

    text: str
    keys: list[str]
    agents_md: str | None
    path: str
    problems: list[dict[str, str]] = field(default_factory=list)

    def event_data(self) -> dict[str, Any]:
        """The ``memory_loaded`` data."""
        return {"path": self.path, "keys": self.keys, "entries": len(self.keys), "agents_md": self.agents_md, "chars": len(self.text), "text": self.text}


def _cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {what} cut at {limit:,} of {len(text):,} characters ...]"


def load_startup(store: MemoryStore, working_dir: Path) -> StartupMemory:
    """Reads the stored memories and ``AGENTS.md``, and builds the block for the system prompt."""
    problems_before = len(store.problems)
    entries = store.entries()
    blocks: list[str] = []
    if entries:
        lines = "\n".join(f"- {e.key}: {e.content}" for e in entries)
        body = _cut(lines, MAX_MEMORY_CHARS, "memory")
        blocks.append(
            "<memory>\nWhat you remembered in earlier sessions (the memory tool recalls, remembers and forgets):\n"
            f"{body}\n</memory>"
        )
    agents_md: str | None = None
    agents_path = working_dir / AGENTS_FILE
    try:
        instructions = agents_path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:  # no AGENTS.md (the usual case), or one that cannot be read
        instructions = ""
    if instructions:
        agents_md = str(agents_path)
        blocks.append(f'<agents-md path="{AGENTS_FILE}">\n{_cut(instructions, MAX_AGENTS_CHARS, AGENTS_FILE)}\n</agents-md>')
    return StartupMemory("\n\n".join(blocks), [e.key for e in entries], agents_md, str(store.path), store.problems[problems_before:])
