"""memory.agent_memory — AgentMemory: ``agent.memory``, the three tiers and what they tell the model.

* Short-term: the conversation itself, ``agent.messages``.
* Mid-term: the compaction summaries, ``agent.memory.summaries`` (read from the journal, so they
  survive resume and fork).
* Long-term: ``agent.memory.long_term``, a ``MemoryStore`` under the working directory that
  outlives sessions; with ``Agent(memory=True)`` it is read at session start with ``AGENTS.md``
  and written by the built-in ``memory`` tool.

Beside the tiers: ``agent.memory.session`` (the todo list, the files read, the running summary;
see ``memory.session``) and the reminders told before each prompt (``memory.reminders``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.events._event import EventType, Payload
from agent_kernel.memory._reminders import ReminderBuilder, Reminders
from agent_kernel.memory._session import SessionMemory, TodoItem
from agent_kernel.memory._startup import StartupMemory, load_startup
from agent_kernel.memory._store import MemoryStore
from agent_kernel.memory._summaries import Summary, summaries_of

if TYPE_CHECKING:
    from agent_kernel.agent._agent import Agent

Namespace = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


class AgentMemory:
    """``agent.memory``: the tiers of one agent's memory, its session memory and its reminders.

    Args:
        agent: the agent it belongs to.
        enabled: the long-term memory is read at session start and the ``memory`` tool offered.
        reminders: what reminders say, or None for none.
        namespace: the notebook's namespace whose variables reminders describe, or None.

    Example:
        >>> agent = Agent("offline", memory=True, journal=None)  # doctest: +SKIP
        >>> agent.memory.long_term.remember("units", "Report figures in metric units.")  # doctest: +SKIP
        >>> [s.text for s in agent.memory.summaries]  # doctest: +SKIP
    """

    def __init__(self, agent: Agent, *, enabled: bool, reminders: Reminders | None, namespace: Namespace | None) -> None:
        self._agent = agent
        self.enabled = enabled
        self.reminders = reminders
        self.namespace = namespace
        self.session = SessionMemory(lambda: agent.events, lambda: agent.working_dir, self.redact, self.readable)
        self._store: MemoryStore | None = None
        self._startup: StartupMemory | None = None
        self._startup_reported = False
        self._builder: ReminderBuilder | None = None

    def __repr__(self) -> str:
        state = "on" if self.enabled else "off"
        return f"AgentMemory(long_term={state}, reminders={'on' if self.reminders else 'off'}, summaries=...)"

    # -- the tiers --------------------------------------------------------------------------

    @property
    def short_term(self) -> list[Any]:
        """The conversation (``agent.messages``)."""
        return self._agent.messages

    @property
    def summaries(self) -> list[Summary]:
        """The session's compaction summaries, oldest first (the mid-term memory)."""
        return summaries_of(self._agent.events)

    @property
    def long_term(self) -> MemoryStore:
        """The store that outlives sessions: ``<working_dir>/.agent_kernel/memory/memory.json``."""
        wanted = MemoryStore.in_dir(Path(self._agent.working_dir))
        if self._store is None or self._store.path != wanted.path:  # the working directory moved
            self._store = wanted
        return self._store

    @property
    def todos(self) -> list[TodoItem]:
        """The agent's todo/plan list."""
        return self.session.todos

    # -- what the model is told -------------------------------------------------------------

    def redact(self, text: str) -> str:
        """``text`` with the agent's secrets hidden (what is journaled must equal what is sent)."""
        redactor = self._agent.redactor
        if redactor is not None and getattr(redactor, "active", True):
            return str(redactor.redact(text))
        return text

    def readable(self, path: str) -> bool:
        """False when the agent's deny rules forbid ``read_file`` on ``path`` (restored files honour them)."""
        permissions = getattr(self._agent.permissions, "permissions", None)
        tool = self._agent.tools.get("read_file")
        if permissions is None or tool is None:
            return True
        from agent_kernel.guard._permissions import call_key  # the permission layer sits above this one

        return permissions.refuses("read_file", call_key(tool, {"path": path}, self._agent.working_dir)) is None

    def system_prompt(self, system: str | None) -> str | None:
        """``system`` with the startup block appended (loaded once per session); as is when off."""
        if not self.enabled:
            return system
        if self._startup is None:
            self._startup = load_startup(self.long_term, Path(self._agent.working_dir))
            text = self.redact(self._startup.text)
            if text != self._startup.text:
                self._startup = dataclasses.replace(self._startup, text=text)
        block = self._startup.text
        if not block:
            return system
        return f"{system}\n\n{block}" if system else block

    def at_prompt(self, prompt_given: bool) -> list[tuple[EventType, Payload, str | None]]:
        """The events to journal as a run starts, each with the text it adds to the prompt (or None).

        ``memory_loaded`` (and a ``memory_warning`` per corrupt file) the first time the startup
        block is used, then the ``system_reminder`` when there is something to remind of. A
        reminder that cannot be built is left out: it never ends a run.
        """
        out: list[tuple[EventType, Payload, str | None]] = []
        startup = self._startup
        if startup is not None and not self._startup_reported:
            self._startup_reported = True
            for problem in startup.problems:
                out.append((EventType.MEMORY_WARNING, problem.copy(), None))
            out.append((EventType.MEMORY_LOADED, startup.event_data(), None))
        if prompt_given and self.reminders is not None:
            builder = self._builder
            if builder is None:
                builder = self._builder = ReminderBuilder(
                    self.reminders, self.namespace, self.session.catch_up, lambda: Path(self._agent.working_dir)
                )
            try:
                reminder = builder.build(self._agent.tools.names)
            except Exception:  # the namespace itself failed (a function returning it raised, say)
                reminder, self._builder = None, None  # the next prompt starts afresh
            if reminder is not None:
                data = reminder.event_data()
                data["text"] = self.redact(reminder.text)
                out.append((EventType.SYSTEM_REMINDER, data, data["text"]))
        return out

    def reset(self) -> None:
        """A new conversation: the startup block is read again, reminders start afresh."""
        self.session.reset()
        self._startup = None
        self._startup_reported = False
        self._builder = None
