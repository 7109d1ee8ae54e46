"""tools.builtin.todo — ``todo_write``: the agent's todo/plan list.

The model writes its whole list each time; the list lives on the agent
(``agent.memory.todos``), is journaled as a ``todo_update`` event, appears in the reminder before
each prompt, and is restored after every compaction. It changes nothing outside the agent, so it
is read-only for the permission modes (plan mode included).

The list goes into every reminder, so it is bounded: at most ``MAX_TODOS`` items of at most
``MAX_TODO_CHARS`` characters, each one line (a longer list is an error the model reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agent_kernel.errors import ToolError
from agent_kernel.tools._tool import Tool, ToolContext

TodoStatus = Literal["pending", "in_progress", "completed"]
TODO_STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed")
#: Items a todo list holds at most, and characters an item holds at most (``todo_write``).
MAX_TODOS = 50
MAX_TODO_CHARS = 500


@dataclass(frozen=True, slots=True)
class TodoItem:
    """One item of the agent's todo/plan list.

    Attributes:
        content: what is to be done.
        status: ``pending``, ``in_progress`` or ``completed``.
    """

    content: str
    status: TodoStatus = "pending"

    def to_dict(self) -> dict[str, str]:
        """The item as journaled."""
        return {"content": self.content, "status": self.status}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TodoItem:
        """An item from a ``todo_update`` event."""
        status = data.get("status", "pending")
        return cls(str(data.get("content", "")), status if status in TODO_STATUSES else "pending")


def _todo_write(todos: list[dict[str, Any]], ctx: ToolContext) -> str:
    """Replaces your todo/plan list. Send the whole list every time, in order; use it for work of
    several steps, keep exactly one item in_progress while you work, and mark items completed as
    soon as they are done.

    Args:
        todos: the items (at most 50), each {"content": "what to do" (one line, at most 500 characters), "status": "pending" | "in_progress" | "completed"}.
    """
    memory = ctx.extras.get("memory")
    if memory is None:
        raise ToolError("todo_write needs an Agent's memory to keep the list in; it runs only inside an Agent.")
    if not isinstance(todos, list):
        raise ToolError("todos is a list of items, each {\"content\": \"what to do\", \"status\": \"pending\"}.")
    if len(todos) > MAX_TODOS:
        raise ToolError(
            f"a todo list holds at most {MAX_TODOS} items of at most {MAX_TODO_CHARS} characters each (got {len(todos)} items); "
            "group small steps into one item, or plan the next steps only."
        )
    items: list[TodoItem] = []
    for number, raw in enumerate(todos, 1):
        content = " ".join(str(raw.get("content", "")).split()) if isinstance(raw, dict) else ""  # one line
        status = raw.get("status", "pending") if isinstance(raw, dict) else None
        if not content:
            raise ToolError(f"todo item {number} has no content; each item is {{\"content\": \"what to do\", \"status\": \"pending\"}}.")
        if len(content) > MAX_TODO_CHARS:
            raise ToolError(
                f"todo item {number} is {len(content):,} characters long; an item holds at most {MAX_TODO_CHARS} characters "
                f"and a list at most {MAX_TODOS} items. Say what to do in one line; keep the details in files or notes."
            )
        if status not in TODO_STATUSES:
            raise ToolError(f"todo item {number} has status {status!r}; use one of {', '.join(TODO_STATUSES)}.")
        items.append(TodoItem(content, status))
    emitter = getattr(ctx.run, "emitter", None)
    memory.session.set_todos(items, emitter.later if emitter is not None else None)
    if not items:
        return "Todo list cleared."
    counts = ", ".join(f"{sum(1 for t in items if t.status == s)} {s.replace('_', ' ')}" for s in TODO_STATUSES)
    listing = "\n".join(f"- [{t.status}] {t.content}" for t in items)
    return f"Todo list updated ({len(items)} items: {counts}):\n{listing}"


todo_write = Tool(_todo_write, name="todo_write", read_only=True, concurrency_safe=False)
