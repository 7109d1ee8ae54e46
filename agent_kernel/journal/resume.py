"""journal.resume — rebuilding a conversation (messages, last TurnState, last seq) from its events.

``Agent.resume`` reads a journal and calls ``rebuild``; ``frames.messages_df`` uses the same
``Conversation`` so the table shows exactly the messages a resumed agent would hold.

How events become messages (the loop records these facts):

* ``run_start``: the user prompt (``data["prompt"]``) is appended;
* ``llm_complete``: the assistant message (``data["message"]``) is appended;
* ``recursion``: the tool results (``data["tool_results"]``) are appended as one user message;
* ``compaction_complete``: everything before the last ``data["kept_messages"]`` messages is
  replaced by one user message holding a ``SummaryBlock(data["summary"])``;
* an assistant message whose tool calls never reached a ``recursion`` (the process was killed
  mid-tool, or the run stopped there) gets a closing user message, so the history stays valid for
  the next model call: each call's recorded ``tool_result`` if it arrived, else an error result
  saying the run was interrupted.

A model response cut off mid-stream (no ``llm_complete``) never became part of the conversation,
so it is not rebuilt; its deltas stay in the journal.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import JournalError, did_you_mean
from ..events import AgentEvent, EventType
from ..messages import Message, SummaryBlock, ToolResultBlock, block_from_dict, message_from_dict
from ..state import TurnState
from .journal import SESSIONS_DIR, session_path
from .reader import read_events

__all__ = [
    "INTERRUPTED_RESULT",
    "Conversation",
    "Entry",
    "Resumed",
    "list_sessions",
    "rebuild",
    "resolve_journal_path",
]

INTERRUPTED_RESULT = "The run was interrupted before this tool call finished (resumed from the journal)."


class Resumed(NamedTuple):
    """What ``rebuild`` recovers: unpacks as ``messages, turn_state, seq``.

    Attributes:
        messages: the conversation, ready for the next model call.
        turn_state: the last recorded ``TurnState`` (None if the journal has none).
        seq: the last ``seq`` recorded; the next event continues from ``seq + 1``.
    """

    messages: list[Message]
    turn_state: TurnState | None
    seq: int


@dataclass(frozen=True)
class Entry:
    """One message as it entered the conversation.

    Attributes:
        message: the message.
        kind: ``prompt``, ``response``, ``tool_results``, ``summary`` or ``interrupted``
            (the synthetic results closing tool calls that never finished).
        event: the event that added it (for ``interrupted``, the last event before the closure).
    """

    message: Message
    kind: str
    event: AgentEvent


class Conversation:
    """Replays events into a conversation; ``history`` keeps every message ever added.

    Example:
        >>> conversation = Conversation()
        >>> for event in events:  # doctest: +SKIP
        ...     conversation.add(event)
        >>> conversation.close_dangling()  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.history: list[Entry] = []
        self.current: list[Entry] = []
        self.turn_state: TurnState | None = None
        self.seq = 0
        self._pending: list[str] = []  # tool_use ids of the last assistant message, not yet answered
        self._results: dict[str, ToolResultBlock] = {}
        self._last: AgentEvent | None = None

    @property
    def messages(self) -> list[Message]:
        """The conversation as a resumed agent holds it (after compactions)."""
        return [entry.message for entry in self.current]

    def _append(self, message: Message, kind: str, event: AgentEvent) -> None:
        entry = Entry(message, kind, event)
        self.history.append(entry)
        self.current.append(entry)

    def add(self, event: AgentEvent) -> None:
        """Applies one event."""
        self.seq = max(self.seq, event.seq)
        kind = event.type
        data = event.data
        if kind is EventType.RUN_START:
            self.close_dangling()
            self._set_turn_state(data.get("turn_state"))
            prompt = data.get("prompt")
            if isinstance(prompt, dict):
                self._append(message_from_dict(prompt), "prompt", event)
            elif prompt is not None:
                self._append(Message.user(str(prompt)), "prompt", event)
        elif kind is EventType.ITERATION_START:
            self._set_turn_state(data.get("turn_state"))
        elif kind is EventType.LLM_COMPLETE and isinstance(data.get("message"), dict):
            self.close_dangling()
            message = message_from_dict(data["message"])
            self._append(message, "response", event)
            self._pending = [block.id for block in message.tool_uses]
            self._results = {}
        elif kind is EventType.TOOL_RESULT and data.get("call_id") in self._pending:
            content = data.get("content", "")
            self._results[data["call_id"]] = ToolResultBlock(
                data["call_id"],
                content if isinstance(content, str) else json.dumps(content, default=str),
                bool(data.get("is_error", False)),
            )
        elif kind is EventType.RECURSION:
            blocks = tuple(block_from_dict(block) for block in data.get("tool_results", ()))
            self._append(Message("user", blocks), "tool_results", event)
            self._pending, self._results = [], {}
        elif kind is EventType.COMPACTION_COMPLETE:
            self._compact(data, event)
        self._last = event

    def _set_turn_state(self, value: Any) -> None:
        if isinstance(value, dict):
            self.turn_state = TurnState.from_dict(value)

    def _compact(self, data: dict[str, Any], event: AgentEvent) -> None:
        kept = int(data.get("kept_messages", 0) or 0)
        keep = self.current[len(self.current) - kept :] if kept > 0 else []
        replaced = int(data.get("messages_removed", len(self.current) - len(keep)))
        summary = Entry(Message("user", (SummaryBlock(str(data.get("summary", "")), replaced),)), "summary", event)
        self.history.append(summary)
        self.current = [summary, *keep]

    def close_dangling(self) -> None:
        """Answers tool calls that never reached a ``recursion`` (see the module docstring)."""
        if not self._pending or self._last is None:
            return
        blocks = tuple(
            self._results.get(call_id) or ToolResultBlock(call_id, INTERRUPTED_RESULT, is_error=True)
            for call_id in self._pending
        )
        self._append(Message("user", blocks), "interrupted", self._last)
        self._pending, self._results = [], {}


def rebuild(events: list[AgentEvent]) -> Resumed:
    """Rebuilds the conversation, the last TurnState and the last seq from a run's events.

    Example:
        >>> messages, turn_state, seq = rebuild(read_events(path))  # doctest: +SKIP
    """
    conversation = Conversation()
    for event in events:
        conversation.add(event)
    conversation.close_dangling()
    return Resumed(conversation.messages, conversation.turn_state, conversation.seq)


def list_sessions(working_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """The session ids that have a journal under ``working_dir`` (default: the current directory)."""
    folder = Path(working_dir if working_dir is not None else Path.cwd()) / SESSIONS_DIR
    return sorted(p.stem for p in folder.glob("*.jsonl"))


def resolve_journal_path(session_id_or_path: str | os.PathLike[str], working_dir: str | os.PathLike[str] | None = None) -> Path:
    """The journal file named by a session id or a path.

    A path (anything with a ``/`` or ending in ``.jsonl``, or an existing file) is taken as is;
    otherwise the value is a session id looked up under ``<working_dir>/.agent_kernel/sessions``.

    Raises:
        JournalError: no such journal; the message lists the sessions that exist.
    """
    text = os.fspath(session_id_or_path)
    candidate = Path(text)
    if not isinstance(session_id_or_path, str) or "/" in text or os.sep in text or text.endswith(".jsonl") or candidate.is_file():
        if candidate.is_file():
            return candidate
        raise JournalError(f"no journal at {candidate}; check the path, or pass a session id.")
    path = session_path(text, working_dir)
    if path.is_file():
        return path
    known = list_sessions(working_dir)
    listing = ", ".join(known[-10:]) if known else "none yet"
    raise JournalError(
        f"no session {text!r} under {path.parent}.{did_you_mean(text, known)} Sessions there: {listing}. "
        "Pass the session id of an earlier run, or the path of its .jsonl journal."
    )
