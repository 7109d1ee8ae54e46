"""tools.builtin.memory — ``memory``: the agent's long-term memory (remember, recall, forget).

Offered with ``Agent(memory=True)``. Recalling only reads, so it runs without asking in every
mode; remembering and forgetting change a file that outlives the session, so the ``default``
mode asks first and ``plan`` mode refuses them. The permission key is ``action:key`` (or
``recall:query``), so rules such as ``memory(recall:*)`` or ``memory(remember:*)`` name one kind
of call. Each step is journaled (``memory_recall``, ``memory_write_start``, ``memory_saved``,
``memory_write_complete``). What the model asks to remember is stored with the agent's secrets
redacted, as the journal holds it: a file that outlives the session never keeps a secret in clear.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from agent_kernel.errors import ToolError, UserError
from agent_kernel.tools._tool import Tool, ToolContext


def _memory(action: Literal["remember", "recall", "forget"], ctx: ToolContext, key: str = "", content: str = "", query: str = "") -> str:
    """Your long-term memory, kept across sessions. Remember lasting facts worth knowing next time
    (the user's preferences, where things are, decisions taken); never secrets.

    Args:
        action: remember (keep content under key), recall (find memories matching query; empty: all), or forget (remove key).
        key: a short name for the memory, one line without < or >, such as "preferred-units" (remember and forget).
        content: the fact to keep (remember).
        query: words to look for in keys and contents (recall).
    """
    agent_memory = ctx.extras.get("memory")
    if agent_memory is None:
        raise ToolError("the memory tool runs only inside an Agent created with memory=True.")
    store = agent_memory.long_term
    emitter = getattr(ctx.run, "emitter", None)
    emit = emitter.later if emitter is not None else None
    try:
        if action == "recall":
            found = store.recall(query, emit=emit)
            if not found:
                return f"No memory matches {query!r}." if query else "Memory is empty."
            return "\n".join(f"- {e.key}: {e.content}" for e in found)
        if action == "remember":
            redact = agent_memory.redact
            entry = store.remember(redact(key) if isinstance(key, str) else key, redact(content) if isinstance(content, str) else content, emit=emit)
            return f"Remembered {entry.key!r}."
        if isinstance(key, str):
            key = agent_memory.redact(key)  # as it was stored
        if store.forget(key, emit=emit):
            return f"Forgot {key.strip()!r}."
        known = ", ".join(e.key for e in store.entries()) or "none"
        return f"There is no memory called {key!r}. Keys: {known}."
    except UserError as exc:
        raise ToolError(str(exc)) from None


class MemoryTool(Tool):
    """The memory tool's class: a ``Tool`` whose read-only-ness depends on each call's arguments.

    The permission modes ask ``read_only_for(arguments)`` instead of ``read_only`` when a tool
    has it (``permissions.is_read_only``).
    """

    def __init__(self, function: Callable[..., Any], *, read_only_when: Callable[[dict[str, Any]], bool], **kwargs: Any) -> None:
        super().__init__(function, **kwargs)
        self._read_only_when = read_only_when

    def read_only_for(self, arguments: dict[str, Any]) -> bool:
        """True when this call only reads (the permission modes then run it without asking)."""
        return bool(self._read_only_when(arguments))


memory = MemoryTool(
    _memory,
    name="memory",
    read_only_when=lambda arguments: arguments.get("action") == "recall",
    concurrency_safe=False,
    permission_key=lambda arguments: f"{arguments.get('action')}:{arguments.get('key') or arguments.get('query') or ''}",
)
