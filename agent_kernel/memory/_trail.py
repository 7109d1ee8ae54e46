"""memory.trail — SessionTrail: what session memory needs from a session's events, kept as they pass.

A compaction restores the todo list and the files read recently, and may use the running
summary; the reminder before each prompt names the files read that changed on disk since the
agent last saw them. All of these are facts about the session's recent past, so they are kept up to date from
the events as they are recorded (``SessionMemory`` feeds the trail the events since it last
looked, a slice of ``agent.events`` that is still in memory), and ``Agent.resume`` builds the
trail in the same pass that rebuilds the conversation. Nothing ever reads a journal from its
start to answer them, so their cost does not grow with the session.

Only the top-level agent's events count (a sub-agent's have an ``agent_id``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.tools.builtin._todo import TodoItem

#: The tool whose successful results mean the agent has seen a file as it then was.
READ_TOOL = "read_file"

#: Tools whose successful results mean the agent has seen a file as it then was (or made it so).
FILE_TOOLS = frozenset({READ_TOOL, "write_file", "edit_file"})

#: Distinct files remembered as read; a compaction restores far fewer (its budget is ~20k tokens).
MAX_RECENT_READS = 256

#: File calls started and not yet answered that are remembered (a crash can leave some open).
_MAX_OPEN_CALLS = 1_024


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session-memory summary and what it stands for.

    Attributes:
        text: the summary.
        covered: it stands for the first ``covered`` messages of the conversation.
        fingerprint: ``fingerprint`` of those messages when it was written; the summary is
            current only while they are unchanged.
    """

    text: str
    covered: int
    fingerprint: str


class SessionTrail:
    """The todo list, the running summary and the files read recently, as of the events added.

    Example:
        >>> trail = SessionTrail()
        >>> trail.recent_reads()
        []
    """

    __slots__ = ("todos", "summary", "files_read", "files_seen", "_reads", "_open_calls")

    def __init__(self) -> None:
        self.todos: list[TodoItem] = []  # as last written (``todo_update``)
        self.summary: SessionSummary | None = None  # the latest since the last compaction
        self.files_read: set[str] = set()  # every file read successfully (the reminder follows them)
        self.files_seen: dict[str, float] = {}  # path -> when the agent last saw or wrote it (epoch s)
        self._reads: OrderedDict[str, None] = OrderedDict()  # paths, the newest read last
        self._open_calls: OrderedDict[str, str] = OrderedDict()  # call id -> path, until answered

    def add(self, event: AgentEvent) -> None:
        """Takes in one event of the session, in order."""
        if event.agent_id is not None:
            return
        kind = event.type
        if kind is EventType.TOOL_START:
            data = event.data
            if data.get("name") in FILE_TOOLS:
                path = (data.get("arguments") or {}).get("path")
                if isinstance(path, str):
                    self._open_calls[str(data.get("call_id"))] = path
                    if len(self._open_calls) > _MAX_OPEN_CALLS:
                        self._open_calls.popitem(last=False)
        elif kind is EventType.TOOL_RESULT:
            data = event.data
            path = self._open_calls.pop(str(data.get("call_id")), None)
            name = data.get("name")
            if path is not None and name in FILE_TOOLS and not data.get("is_error"):
                self.files_seen[path] = max(self.files_seen.get(path, 0.0), float(data.get("ended_at") or event.ts))
                if name == READ_TOOL:
                    self.read(path)
        elif kind is EventType.TODO_UPDATE:
            self.todos = [TodoItem.from_dict(item) for item in event.data.get("todos", ())]
        elif kind is EventType.SESSION_MEMORY_UPDATE:
            data = event.data
            if not data.get("error"):
                self.summary = SessionSummary(str(data["summary"]), int(data["messages_covered"]), str(data["fingerprint"]))
        elif kind is EventType.COMPACTION_COMPLETE:
            self.summary = None  # it stood for messages the compaction replaced

    def read(self, path: str) -> None:
        """Notes that the agent read ``path`` (it becomes the most recent)."""
        self.files_read.add(path)
        reads = self._reads
        reads.pop(path, None)
        reads[path] = None
        if len(reads) > MAX_RECENT_READS:
            reads.popitem(last=False)

    def recent_reads(self) -> list[str]:
        """Paths read successfully with ``read_file``, most recent first, each once."""
        return list(reversed(self._reads))

    def __repr__(self) -> str:
        summary: Any = None if self.summary is None else f"{self.summary.covered} messages"
        return f"SessionTrail(todos={len(self.todos)}, summary={summary}, reads={len(self._reads)})"
