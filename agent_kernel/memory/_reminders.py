"""memory.reminders — system reminders: what changed in the notebook, told before each prompt.

Before each prompt the agent gets one block, marked ``<system-reminder>``, with what changed
since the last prompt that it may care about:

* variables of the notebook's namespace that are new, changed or removed, by name, type and
  shape (``memory.namespace``), never by value;
* files it read that changed on disk since it last read or wrote them;
* its todo/plan list, when it has one.

Nothing changed, no block. The block joins the prompt's user message and is journaled as a
``system_reminder`` event, which ``journal.resume.Conversation`` applies the same way, so a
resumed agent holds the same messages as the live one.

Names, column labels, file paths and todo items are not the kernel's own text: the block's tags
are made inert inside them (``memory.tags``), so none can close the block early. Describing a
variable never raises and never calls into an object it does not know (``memory.namespace``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_kernel.errors import UserError
from agent_kernel.events import payloads as p
from agent_kernel.memory._namespace import NamespaceWatcher, VariableChange
from agent_kernel.memory._session import format_todos
from agent_kernel.memory._tags import REMINDER_TAG, neutralise
from agent_kernel.memory._trail import SessionTrail


@dataclass(frozen=True)
class Reminders:
    """What the reminder before each prompt may say (``Agent(reminders=...)``).

    Attributes:
        variables: new, changed and removed variables of the namespace (``Agent(namespace=...)``).
        files: files the agent read that changed on disk since.
        todos: the agent's todo/plan list.
        max_variables: variables listed at most; the rest are counted.

    Example:
        >>> from agent_kernel import Agent
        >>> agent = Agent("offline", reminders=Reminders(files=False), journal=None)  # doctest: +SKIP
    """

    variables: bool = True
    files: bool = True
    todos: bool = True
    max_variables: int = 30

    def __post_init__(self) -> None:
        if self.max_variables < 1:
            raise UserError(f"Reminders(max_variables=...) must be at least 1, got {self.max_variables}.")

    @classmethod
    def coerce(cls, value: Any) -> Reminders | None:
        """``Agent(reminders=...)``: True (the defaults), False or None (off), or a ``Reminders``.

        Raises:
            UserError: anything else.
        """
        if value is True:
            return cls()
        if value is False or value is None:
            return None
        if isinstance(value, cls):
            return value
        raise UserError(f"reminders={value!r} is not understood; pass True, False or Reminders(variables=..., files=..., todos=...).")


@dataclass(frozen=True, slots=True)
class Reminder:
    """One reminder: its text and what it lists (the ``system_reminder`` event's data)."""

    text: str
    variables: list[VariableChange]
    files: list[str]
    todos: int

    def event_data(self) -> p.SystemReminder:
        """The ``system_reminder`` data (the variables listed in the text; the rest are counted there)."""
        return p.SystemReminder(text=self.text, variables=[v.to_dict() for v in self.variables if v.description or v.change == "removed"],
                                files=self.files, todos=self.todos)


def _changed_files(trail: SessionTrail, root: Path) -> list[str]:
    """The files read that changed (or went) on disk since the agent last saw them; each is then
    counted as seen, so it is named once per change."""
    seen = trail.files_seen
    out = []
    for path in sorted(trail.files_read):
        try:
            mtime = os.stat(root / path).st_mtime
        except OSError:
            if seen.get(path, 0.0) >= 0:
                out.append(f"{path} (deleted)")
                seen[path] = -1.0
            continue
        if mtime > seen.get(path, 0.0):
            out.append(path)
            seen[path] = mtime
    return out


class ReminderBuilder:
    """Builds the reminder before each prompt of one agent.

    Args:
        config: what reminders say.
        namespace: the notebook's namespace (a mapping or a function returning one), or None.
        trail: the session's trail now (``SessionMemory.catch_up``): its todo list and the
            files the agent read, wrote and saw.
        working_dir: where the agent's file paths are resolved.
    """

    def __init__(
        self,
        config: Reminders,
        namespace: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None,
        trail: Callable[[], SessionTrail],
        working_dir: Callable[[], Path],
    ) -> None:
        self.config = config
        self.watcher = NamespaceWatcher(namespace) if namespace is not None and config.variables else None
        self._trail = trail
        self._working_dir = working_dir

    def build(self, tools: Sequence[str] = ()) -> Reminder | None:
        """The reminder for the prompt about to be sent, or None when there is nothing to say.

        Args:
            tools: the agent's tool names (file changes are only followed with ``read_file``).
        """
        config = self.config
        sections: list[str] = []
        variables: list[VariableChange] = []
        if self.watcher is not None:
            variables, first = self.watcher.changes(config.max_variables)
            if variables:
                sections.append(_variables_section(variables, first, config.max_variables))
        files: list[str] = []
        trail = self._trail()
        if config.files and "read_file" in tools:
            files = _changed_files(trail, self._working_dir())
            if files:
                sections.append("Files you read that changed on disk since you last saw them (read them again before relying on them):\n"
                                + "\n".join(f"- {path}" for path in files))
        todos = list(trail.todos) if config.todos else []
        if todos:
            sections.append("Your todo list:\n" + format_todos(todos))
        if not sections:
            return None
        lead = "What changed in the notebook since the last message (from the notebook, not written by the user):"
        text = f"<{REMINDER_TAG}>\n{lead}\n\n" + neutralise("\n\n".join(sections)) + f"\n</{REMINDER_TAG}>"
        return Reminder(text, variables, files, len(todos))


def _variables_section(changes: list[VariableChange], first: bool, limit: int) -> str:
    shown = changes[:limit]
    if first:
        head = "Variables in the notebook (names, types and shapes; values are not shown):"
        lines = [f"- {c.name}: {c.description}" for c in shown]
    else:
        head = "Variables that changed (names, types and shapes; values are not shown):"
        lines = [f"- {c.name} ({c.change}){': ' + c.description if c.description else ''}" for c in shown]
    if len(changes) > limit:
        lines.append(f"- ... and {len(changes) - limit} more")
    return head + "\n" + "\n".join(lines)
