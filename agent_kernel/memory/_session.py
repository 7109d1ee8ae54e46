"""memory.session — SessionMemory: what a compaction must not lose, and a summary kept up to date.

Three things of one session live here:

* the agent's todo/plan list (``todo_write`` sets it; a ``todo_update`` event journals each
  version);
* the files the agent read recently, found in the session's events (``read_file`` results),
  whose current contents are restored after a compaction, newest first, within a token budget
  that the todo list counts in too (a compaction must leave the history smaller than it was);
* the session-memory summary: between turns, when the conversation has grown enough since the
  last one, a model brings a running summary up to date (``session_memory_update``). A
  compaction whose cut falls where that summary ends uses it instead of asking for a new one.

The journal is the source of truth. All three are kept by a ``SessionTrail`` (``memory.trail``)
from the session's events as they pass: each time they are needed, the trail takes in the events
recorded since it last looked (still in memory), and ``Agent.resume`` fills it in the pass that
rebuilds the conversation. No question here reads a journal from its start, so a compaction
costs the same after a day of work as after a minute.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_kernel._util.background import BackgroundWork, Finished
from agent_kernel.context._compaction import SECTIONS, ask_for_summary, is_valid_cut, render_transcript
from agent_kernel.context._session_config import SessionMemoryConfig
from agent_kernel.events import payloads as p
from agent_kernel.events._event import AgentEvent, Emit, EventType
from agent_kernel.memory._tags import FILE_TAG, RESTORED_TAG, attribute, neutralise
from agent_kernel.memory._trail import SessionSummary, SessionTrail
from agent_kernel.messages import Message
from agent_kernel.models import _pricing as pricing
from agent_kernel.models._base import Model, Usage
from agent_kernel.tools.builtin._todo import TodoItem


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    """A session-memory update's model call (counted in the run's usage and cost)."""

    usage: Usage | None
    cost_usd: float | None


@dataclass(frozen=True, slots=True)
class Restoration:
    """What is restored after a compaction.

    Attributes:
        text: the marked block added behind the summary.
        files: ``{"path", "tokens", "cut"}`` of each restored file, newest read first.
        todos: items of the todo list restored (a list too long for the budget is cut).
    """

    text: str
    files: list[dict[str, Any]]
    todos: int


_RESTORED_LEAD = "The conversation was compacted; this restores what you were working with."
_FILES_HEADING = "Files you read recently, as they are on disk now (newest first):"


def fingerprint(messages: Sequence[Message]) -> str:
    """A digest of ``messages`` (equal messages, equal digest: live and resumed agents agree)."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(json.dumps(message.to_dict(), sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
        digest.update(b"\x1e")
    return digest.hexdigest()[:32]


def format_todos(todos: Sequence[TodoItem]) -> str:
    """The todo list as the model reads it: one line per item, tags made inert (``memory.tags``)."""
    return neutralise("\n".join(f"- [{item.status}] {' '.join(item.content.split())}" for item in todos))


def _todo_part(todos: Sequence[TodoItem], budget: int, count: Callable[[str], int]) -> tuple[str, int]:
    """The todo list's part of the restored block within ``budget`` tokens, and the items in it.

    A list too long keeps its unfinished items first, in order, as many as fit; the rest are
    counted. ("", 0) when not even the heading fits.
    """
    def part(items: Sequence[TodoItem], dropped: int) -> str:
        more = f"\n- ... {dropped} more items (finished ones first left out)" if dropped else ""
        return f"Your todo list:\n{format_todos(items)}{more}"

    text = part(todos, 0)
    if count(text) <= budget:
        return text, len(todos)
    unfinished = [t for t in todos if t.status != "completed"]
    low, high = 0, len(unfinished)  # the longest prefix of the unfinished items that fits
    while low < high:
        mid = (low + high + 1) // 2
        if count(part(unfinished[:mid], len(todos) - mid)) <= budget:
            low = mid
        else:
            high = mid - 1
    text = part(unfinished[:low], len(todos) - low)
    return (text, low) if count(text) <= budget else ("", 0)


class SessionMemory:
    """The session memory of one agent (``agent.memory.session``).

    Args:
        events: the session's events (``agent.events``); the trail takes in those recorded
            since it last looked.
        working_dir: where relative file paths are resolved.
        redact: hides secrets in restored file contents (the agent's redactor), or None.
        readable: whether a path may be read now (the agent's deny rules), or None for any.
    """

    def __init__(
        self,
        events: Callable[[], Sequence[AgentEvent]],
        working_dir: Callable[[], Path],
        redact: Callable[[str], str] | None = None,
        readable: Callable[[str], bool] | None = None,
    ) -> None:
        self._events = events
        self._working_dir = working_dir
        self._redact = redact
        self._readable = readable
        self._trail = SessionTrail()
        self._seen = 0  # the events the trail has taken in (positions in ``events()``)
        #: Where summary updates run while a run is in progress (its ``BackgroundWork``), so they
        #: never hold up a turn; None: they run inline (outside a run, a sub-agent's run).
        self.background: BackgroundWork | None = None
        self._updating = False

    def reset(self) -> None:
        """Forgets the session's state (a new conversation)."""
        self._trail = SessionTrail()
        self._seen = len(self._events())

    def adopt(self, trail: SessionTrail, seen: int) -> None:
        """Takes ``trail`` as the state after the session's first ``seen`` events (a resumed or forked
        agent, whose events were read once already)."""
        self._trail = trail
        self._seen = seen

    def catch_up(self) -> SessionTrail:
        """The trail, after taking in the events recorded since it last looked.

        The agent calls this as each run starts, before ``agent.events`` lets old events go, so
        the events taken in are always still in memory.
        """
        events = self._events()
        total = len(events)
        seen = self._seen
        if total < seen:  # the log was cleared: a new conversation
            self._trail, seen = SessionTrail(), 0
        if total > seen:
            add = self._trail.add
            for event in events[seen:total]:
                add(event)
        self._seen = total
        return self._trail

    # -- the todo list ----------------------------------------------------------------------

    @property
    def todos(self) -> list[TodoItem]:
        """The agent's todo/plan list, as last written."""
        return list(self.catch_up().todos)

    def set_todos(self, todos: Sequence[TodoItem], emit: Emit | None = None) -> None:
        """Replaces the todo list and journals it as ``todo_update``."""
        self.catch_up().todos = list(todos)
        if emit is not None:
            statuses = [t.status for t in todos]
            emit(EventType.TODO_UPDATE, p.TodoUpdate(todos=[t.to_dict() for t in todos], pending=statuses.count("pending"),
                                                      in_progress=statuses.count("in_progress"), completed=statuses.count("completed")))

    # -- files read -------------------------------------------------------------------------

    def recent_reads(self) -> list[str]:
        """Paths the agent read successfully with ``read_file``, most recent first, each once
        (the last ``MAX_RECENT_READS``)."""
        return self.catch_up().recent_reads()

    def _read_now(self, path: str, max_chars: int) -> tuple[str, bool] | None:
        """The file's text now (cut to ``max_chars``), or None when it is gone, outside, or binary."""
        root = self._working_dir().resolve()
        try:
            target = (root / path).resolve()
            inside = str(target.relative_to(root))  # only files inside the working directory come back
            if not target.is_file():
                return None
            # A deny rule holds for the name read and for the file it leads to now (a swapped link).
            if self._readable is not None and not (self._readable(path) and self._readable(inside)):
                return None
            with open(target, "rb") as f:
                data = f.read(max_chars * 4 + 4)
        except (OSError, ValueError):
            return None
        if b"\x00" in data[:8192]:
            return None
        text = data.decode("utf-8", errors="replace")
        cut = len(text) > max_chars or os.path.getsize(target) > len(data)
        return text[:max_chars], cut

    # -- restoration ------------------------------------------------------------------------

    def restoration(self, config: SessionMemoryConfig, count: Callable[[str], int], chars_per_token: float) -> Restoration | None:
        """The block restored after a compaction (None: no todo list and no file to restore).

        Args:
            config: budgets.
            count: estimated tokens of a text.
            chars_per_token: the estimate's ratio, to cut a file near its token limit.
        """
        if not config.restore:
            return None
        todos = self.todos
        parts: list[str] = []
        # The block's frame and headings count too: the budget is what the block may add.
        remaining = config.budget_tokens - count(f"<{RESTORED_TAG}>\n{_RESTORED_LEAD}\n\n\n\n{_FILES_HEADING}\n</{RESTORED_TAG}>")
        restored_todos = 0
        if todos and remaining > 0:
            todo_text, restored_todos = _todo_part(todos, remaining, count)
            if todo_text:
                parts.append(todo_text)
                remaining -= count(todo_text)
        files: list[dict[str, Any]] = []
        file_parts: list[str] = []
        for path in self.recent_reads():
            if remaining <= 0:
                break
            opening = f'<{FILE_TAG} path="{attribute(path)}"'
            limit = min(config.per_file_tokens, remaining - count(f'{opening} cut="true">\n\n</{FILE_TAG}>'))
            if limit <= 0:
                continue
            found = self._read_now(path, max(1, int(limit * chars_per_token)))
            if found is None:
                continue
            text, cut = found
            # A cut file says so: the model reads the rest with read_file if it needs it.
            attrs = ' cut="true"' if cut else ""
            block = f'{opening}{attrs}>\n{neutralise(text)}\n</{FILE_TAG}>'
            tokens = count(block)
            if tokens > remaining:
                continue  # a smaller, older file may still fit
            remaining -= tokens
            file_parts.append(block)
            files.append({"path": path, "tokens": tokens, "cut": cut})
        if file_parts:
            parts.append(f"{_FILES_HEADING}\n" + "\n".join(file_parts))
        if not parts:
            return None
        text = f"<{RESTORED_TAG}>\n{_RESTORED_LEAD}\n\n" + "\n\n".join(parts) + f"\n</{RESTORED_TAG}>"
        if self._redact is not None:
            # The journal keeps the block redacted; the history must hold the same text.
            text = self._redact(text)
        return Restoration(text, files, restored_todos)

    # -- the session-memory summary ---------------------------------------------------------

    @property
    def summary(self) -> SessionSummary | None:
        """The latest session-memory summary since the last compaction, or None."""
        return self.catch_up().summary

    def compacted(self) -> None:
        """The conversation was compacted: the summary no longer matches its messages."""
        self.catch_up().summary = None

    def _covered(self, history: Sequence[Message]) -> int:
        summary = self.summary
        return summary.covered if summary is not None and summary.covered <= len(history) else 0

    def summary_due(self, history: Sequence[Message], config: SessionMemoryConfig, count: Callable[[Sequence[Message]], int]) -> bool:
        """True when the conversation grew by ``update_tokens`` since the summary last covered it."""
        if not config.summary or len(history) < 2:
            return False
        covered = self._covered(history)
        return _cut_point(history) > covered and count(history[covered:]) >= config.update_tokens

    def current(self, history: Sequence[Message], kept_budget: int, count: Callable[[Sequence[Message]], int]) -> SessionSummary | None:
        """The summary, when a compaction can use it now: it stands for exactly the messages
        before a valid cut, they are unchanged, and the messages after it fit ``kept_budget``."""
        summary = self.summary
        if summary is None or not 0 < summary.covered < len(history) or not is_valid_cut(history, summary.covered):
            return None
        if count(history[summary.covered :]) > kept_budget:
            return None  # too much happened since: a fresh summary would cut later
        if fingerprint(history[: summary.covered]) != summary.fingerprint:
            return None
        return summary

    async def update_summary(self, history: Sequence[Message], model: Model, emit: Emit, max_block_chars: int = 2_000) -> SummaryUpdate | None:
        """Brings the summary up to date with the messages since it (one model call, no tools).

        Journals ``session_memory_update``; a failed call is journaled with its ``error`` and
        leaves the summary as it was. Returns the call's usage (None when nothing was due).

        While a run is in progress (``background`` set) the call runs beside it and this returns
        None at once: the turn that found it due goes on without waiting, the update covers the
        conversation as it was then, and the run charges its usage when it ends (one update at
        a time; a due one is asked for again at a later turn).
        """
        work = self.background
        if work is None:
            return await self._update_summary(history, model, emit, max_block_chars, background=False)
        if self._updating:
            return None
        self._updating = True
        snapshot = list(history)  # the next turn appends to the live list meanwhile

        async def update() -> Finished | None:
            try:
                done = await self._update_summary(snapshot, model, emit, max_block_chars, background=True)
            finally:
                self._updating = False
            return None if done is None else Finished("session memory", usage=done.usage, cost_usd=done.cost_usd)

        work.start("session memory", update(), reports=False)
        return None

    async def _update_summary(self, history: Sequence[Message], model: Model, emit: Emit, max_block_chars: int, *, background: bool) -> SummaryUpdate | None:
        cut = _cut_point(history)
        previous = self.summary
        valid = previous is not None and 0 < previous.covered <= cut and fingerprint(history[: previous.covered]) == previous.fingerprint
        start = previous.covered if valid and previous is not None else 0
        if cut <= start:
            return None
        transcript = render_transcript(history[start:cut], max_block_chars=max_block_chars)
        prompt = update_prompt(previous.text if valid and previous is not None else None, transcript)
        name = model.name
        started = time.monotonic()
        try:
            text, usage = await ask_for_summary(model, prompt)
        except Exception as exc:  # a failed update costs nothing but freshness: compaction still works
            emit(
                EventType.SESSION_MEMORY_UPDATE,
                p.SessionMemoryUpdate(summary="", messages_covered=start, messages_added=0, fingerprint="", model=name,
                                      usage=None, cost_usd=None, error=f"{type(exc).__name__}: {exc}",
                                      duration_s=time.monotonic() - started, background=background),
            )
            return SummaryUpdate(None, None)
        cost = pricing.cost(name, usage) if usage is not None and isinstance(name, str) else None
        summary = self.catch_up().summary = SessionSummary(text, cut, fingerprint(history[:cut]))
        emit(
            EventType.SESSION_MEMORY_UPDATE,
            p.SessionMemoryUpdate(summary=text, messages_covered=cut, messages_added=cut - start, fingerprint=summary.fingerprint,
                                  model=name, usage=usage.to_dict() if usage is not None else None, cost_usd=cost,
                                  duration_s=time.monotonic() - started, background=background),
        )
        return SummaryUpdate(usage, cost)


def _cut_point(history: Sequence[Message]) -> int:
    """Where a summary written now would end: the latest valid cut before the newest message."""
    cut = len(history) - 1
    while cut > 0 and not is_valid_cut(history, cut):
        cut -= 1
    return max(cut, 0)


def update_prompt(previous: str | None, transcript: str) -> str:
    """The prompt that brings a session-memory summary up to date with ``transcript``."""
    headings = "\n".join(f"## {s}" for s in SECTIONS)
    base = (
        f"Here is the summary of the conversation so far:\n<summary>\n{previous}\n</summary>\n\n"
        "Update it with what happened next (below), keeping everything still true."
        if previous
        else "Summarise the conversation below."
    )
    return (
        f"{base} Your summary may replace these messages in the context window, so the work must be "
        f"able to continue from it alone.\n\nWrite exactly these eight sections, each under its Markdown heading:\n"
        f"{headings}\n\nKeep file paths, names, numbers, commands and error messages verbatim. Write 'none' under a "
        f"heading with nothing to report.\n\n<conversation>\n{transcript}\n</conversation>"
    )
