"""journal.resume — rebuilding a conversation (messages, last TurnState, last seq) from its events.

``Agent.resume`` reads a journal and calls ``rebuild``; ``frames.messages_df`` uses the same
``Conversation`` so the table shows exactly the messages a resumed agent would hold.

How events become messages, mirroring what the loop and ``Agent`` do to their history:

* ``run_start``: the user prompt (``data["prompt"]``); after a message of tool results (a run
  that was cancelled or stopped by a tool) it is merged into that message, so roles alternate;
* ``llm_complete``: the assistant message (``data["message"]``);
* ``recursion``: the tool results (``data["tool_results"]``) as one user message;
* a ``run_start`` with ``continues`` (``Agent.continue_run`` after a process died mid-turn) keeps
  the interrupted turn's tool calls open: that run's ``recursion`` answers them;
* ``steer``: a message steered into the run (``data["text"]``), joined to the tool results
  before it as ``run_start``'s prompt is, so roles alternate; ``subagent_report`` (a background
  sub-agent's answer) joins the same way;
* ``system_reminder``: the reminder told before a prompt (``data["text"]``), joined to the
  prompt's message as ``Agent`` joins it;
* ``compaction_complete``: the history becomes ``compacted_history(summary, messages_removed,
  last kept_messages messages, restored)``, the one function the compactor itself uses;
* ``cancelled`` / ``error`` while a response was streaming: the partial response, rebuilt from
  its deltas and ready tool calls as the loop's message builder does;
* tool calls left without a ``recursion`` (a tool stopped the run, the run was cancelled or
  failed, or the process was killed mid-tool) get one closing user message, so the history stays
  valid for the next model call: each call's recorded ``tool_result`` if one arrived, else an
  error result saying the run was interrupted (``INTERRUPTED_RESULT``).

A response cut off by a crash (no ``llm_complete``, no ``cancelled``) never entered the
conversation, so it is not rebuilt; its deltas stay in the journal.

A journal that ends inside a turn, after the model's tool calls and before their ``recursion``
(the process died while a call ran or waited for approval), is ``Conversation.interrupted``: the
calls, the results already recorded and the approvals that were pending, so ``Agent.resume`` can
ask again and finish the turn without asking the model again. When the call that was running is
a sub-agent's (``Agent.as_tool``, the ``task`` tool) and the sub-agent itself died inside a turn,
its own conversation is rebuilt the same way (``SubagentTurn``): continuing runs that call again,
and the sub-agent finishes its turn instead of starting over.
"""

from __future__ import annotations

import copy
import json
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from agent_kernel.errors import JournalError, UserError, did_you_mean
from agent_kernel.events import payloads as p
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._turn import TurnState
from agent_kernel.journal._reader import LineCount, events_of, iter_records
from agent_kernel.journal._writer import SESSIONS_DIR, session_path
from agent_kernel.messages import ImageBlock, Message, ToolResultBlock, block_from_dict, message_from_dict
from agent_kernel.models._response import ResponseBuilder

INTERRUPTED_RESULT = "The run was interrupted before this tool call finished (resumed from the journal)."


@dataclass(frozen=True)
class ReplacedRequest:
    """A request a ``before_llm_call`` hook replaced, as the model was sent it, rebuilt from the
    journal (``llm_start.sent``).

    Attributes:
        run_id, turn_id, seq: the ``llm_start`` that recorded it.
        messages: the messages sent: the first ``kept_messages`` of the conversation as it stood
            (old tool results as the conversation holds them: micro-compaction may have sent them
            shorter), then the messages the hook put in their place.
        system: the system prompt sent, when the hook changed it (None: unchanged).
        tools: the names of the tools offered, when the hook changed them (None: unchanged).
        options: the model options the hook changed, with their new values (empty: none).
    """

    run_id: str
    turn_id: str | None
    seq: int
    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[str, ...] | None = None
    options: dict[str, Any] = field(default_factory=dict)


def _replaced(messages: Sequence[Message], sent: Mapping[str, Any], event: AgentEvent) -> ReplacedRequest:
    kept = int(sent.get("kept_messages") or 0)
    tail = tuple(message_from_dict(m) for m in sent.get("messages") or () if isinstance(m, dict))
    tools = sent.get("tools")
    return ReplacedRequest(
        event.run_id, event.turn_id, event.seq, (*messages[:kept], *tail),
        sent.get("system") if isinstance(sent.get("system"), str) else None,
        tuple(str(t) for t in tools) if isinstance(tools, list) else None,
        dict(sent.get("options") or {}),
    )


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
        kind: ``prompt``, ``steer``, ``response``, ``partial`` (a response cut short by a cancel or an
            error), ``tool_results``, ``summary`` or ``interrupted`` (results closing tool calls
            that never finished, synthetic where no result was recorded).
        event: the event that added it (for ``interrupted``, the last event before the closure).
    """

    message: Message
    kind: str
    event: AgentEvent


@dataclass(frozen=True)
class Interrupted:
    """A turn the process died in, between the model's tool calls and their results.

    Attributes:
        message: the assistant message whose tool calls wait (it ends the conversation).
        answered: results already settled, by call id: those recorded, and an interrupted-call
            error for a call that had started but never finished (it may have had effects, so it
            is not run again), unless a sub-agent's turn continues it (``subagents``).
        approvals: the ``approval_required`` data of each call that was waiting for a decision.
        closing: the message that answers every call at once (``close_dangling``'s), for a new
            prompt that does not continue the turn.
        turn_state: the interrupted turn.
        run_id: the run it belonged to.
        subagents: by the call id that started it, each sub-agent that was itself inside a turn
            when the process died; continuing runs that call again and the sub-agent goes on.
    """

    message: Message
    answered: dict[str, ToolResultBlock]
    approvals: list[dict[str, Any]]
    closing: Message
    turn_state: TurnState | None
    run_id: str
    subagents: dict[str, SubagentTurn] = field(default_factory=dict)

    def unfinished_results(self) -> list[p.ToolResult]:
        """``tool_result`` data for the calls that had started and never finished: they are
        answered with an error, not run again (they may have had effects)."""
        return [
            p.ToolResult(call_id=use.id, name=use.name, content=self.answered[use.id].content, is_error=True, synthetic=True,
                         duration_s=None, started_at=None, ended_at=None)
            for use in self.message.tool_uses
            if use.id in self.answered and self.answered[use.id].content == INTERRUPTED_RESULT
        ]

    def keeping_subagents(self, resumable: Callable[[str], bool]) -> Interrupted:
        """This turn with only the sub-agents whose call's tool ``resumable`` (given the tool's
        name) says may run again; the others' calls are answered as interrupted, as any started
        call is (a tool that does more than run its sub-agent must not run twice)."""
        names = {use.id: use.name for use in self.message.tool_uses}
        dropped = [call_id for call_id in self.subagents if not resumable(names.get(call_id, ""))]
        if not dropped:
            return self
        answered = {**self.answered, **{call_id: ToolResultBlock(call_id, INTERRUPTED_RESULT, is_error=True) for call_id in dropped}}
        kept = {call_id: child for call_id, child in self.subagents.items() if call_id not in dropped}
        return replace(self, answered=answered, subagents=kept)

    @property
    def all_approvals(self) -> list[dict[str, Any]]:
        """The pending approvals of this turn and of its sub-agents' turns, outermost first."""
        inner = [child.interrupted for child in self.subagents.values() if child.interrupted is not None]
        return [*self.approvals, *(data for turn in inner for data in turn.all_approvals)]


@dataclass(frozen=True)
class SubagentTurn:
    """A sub-agent's conversation as a process left it, dying while the sub-agent worked.

    Attributes:
        agent_id: the id its events are tagged with (the continued run keeps it).
        name: its name.
        prompt: the instructions it was given.
        messages: its conversation: ending with the assistant message whose calls wait when it
            died inside a turn (``interrupted``), else with the message its model was answering
            (its prompt or tool results: the answer in flight never completed, so it is asked again).
        turn_state: the turn it was in.
        run_id: the run it was in.
        interrupted: its open turn (the calls, the results recorded, the approvals pending), or
            None when it died while its model was answering.
    """

    agent_id: str
    name: str
    prompt: str
    messages: list[Message]
    turn_state: TurnState | None
    run_id: str
    interrupted: Interrupted | None


class _Partial:
    """A streaming response rebuilt from its journaled deltas with the loop's own builder."""

    def __init__(self) -> None:
        self.builder = ResponseBuilder()

    def add(self, event: AgentEvent) -> None:
        kind, data = event.type, event.data
        if kind is EventType.TEXT_DELTA:
            self.builder.text(str(data.get("text", "")))
        elif kind is EventType.THINKING_DELTA:
            self.builder.thinking(data.get("text") or "", data.get("signature"))
        elif kind is EventType.TOOL_CALL_READY:
            arguments = data.get("arguments")
            self.builder.tool_use(str(data.get("call_id")), str(data.get("name")), arguments if isinstance(arguments, dict) else {})

    def build(self) -> Message | None:
        message = self.builder.build()
        return message if message.content else None


_PARTIAL_EVENTS = frozenset({EventType.TEXT_DELTA, EventType.THINKING_DELTA, EventType.TOOL_CALL_READY})


class Conversation:
    """Replays events into a conversation; ``history`` keeps every message ever added.

    Example:
        >>> conversation = Conversation()
        >>> for event in events:  # doctest: +SKIP
        ...     conversation.add(event)
        >>> conversation.close_dangling()  # doctest: +SKIP
    """

    def __init__(self, agent_id: str | None = None) -> None:
        self.agent_id = agent_id  # whose conversation: the top-level agent's (None) or a sub-agent's
        self.history: list[Entry] = []
        self.current: list[Entry] = []
        self.turn_state: TurnState | None = None
        self.turn_states: list[TurnState] = []
        self.seq = 0
        self._pending: list[str] = []  # tool_use ids of the last assistant message, not yet answered
        self._results: dict[str, ToolResultBlock] = {}  # tool_result events since the last llm_start
        self._started: set[str] = set()  # tool_start call ids since the last llm_start
        self._asked: dict[str, dict[str, Any]] = {}  # approval_required data of calls not yet decided
        self._synthetic: set[str] = set()  # calls a stop answered (synthetic tool_result) since the last llm_start
        self._kept_open = False  # the last run's stop kept its calls open (``cancelled.keeps_calls_open``)
        self._partial: _Partial | None = None
        self._last: AgentEvent | None = None
        #: The requests hooks replaced, as sent (``ReplacedRequest``), oldest first.
        self.replaced: list[ReplacedRequest] = []

    def copy(self) -> Conversation:
        """An independent copy, to go on from this point while this one goes on too."""
        twin = copy.copy(self)
        twin.history, twin.current, twin.turn_states = list(self.history), list(self.current), list(self.turn_states)
        twin._pending, twin._results, twin._started, twin._asked = list(self._pending), dict(self._results), set(self._started), dict(self._asked)
        twin._synthetic = set(self._synthetic)
        twin.replaced = list(self.replaced)
        twin._partial = None  # a stop never needs the response in flight: it is asked again
        return twin

    @property
    def last_event(self) -> AgentEvent | None:
        """The last event applied (None before any)."""
        return self._last

    @property
    def continuing_a_cut_answer(self) -> bool:
        """True when the conversation ends with the loop's request to go on from an answer cut
        off at ``max_tokens`` (a ``continuation``)."""
        return bool(self.current) and self.current[-1].event.type is EventType.CONTINUATION

    @property
    def messages(self) -> list[Message]:
        """The conversation as a resumed agent holds it (after compactions)."""
        return [entry.message for entry in self.current]

    def _with_images(self, block: Any) -> Any:
        """A recursion's tool result with the images its ``tool_result`` event holds (recorded once, there)."""
        if isinstance(block, ToolResultBlock) and not block.images:
            recorded = self._results.get(block.tool_use_id)
            if recorded is not None and recorded.images:
                return ToolResultBlock(block.tool_use_id, block.content, block.is_error, recorded.images)
        return block

    def _append(self, message: Message, kind: str, event: AgentEvent) -> None:
        entry = Entry(message, kind, event)
        self.history.append(entry)
        self.current.append(entry)

    def add(self, event: AgentEvent) -> None:
        """Applies one event."""
        self.seq = max(self.seq, event.seq)
        if event.agent_id != self.agent_id:
            return  # another agent's event: its messages are its own conversation, not this one
        kind = event.type
        data = event.data
        if self._partial is not None and kind in _PARTIAL_EVENTS:
            self._partial.add(event)
        if kind is EventType.RUN_START:
            if not data.get("continues"):  # a run that continues the interrupted turn answers its calls
                self.close_dangling()
            self._kept_open = False
            self._set_turn_state(data.get("turn_state"), new_turn=False)  # its first iteration_start follows
            self._prompt(data.get("prompt"), event)
        elif kind is EventType.ITERATION_START:
            self._set_turn_state(data.get("turn_state"), new_turn=True)
        elif kind is EventType.LLM_START:
            self._partial = _Partial()
            self._results, self._started, self._asked, self._synthetic = {}, set(), {}, set()
            sent = data.get("sent")
            if isinstance(sent, dict):  # a hook replaced the request: what was sent, as a diff
                if self.replaced and self.replaced[-1].turn_id == event.turn_id and data.get("attempt"):
                    self.replaced.pop()  # sent again after a failed attempt: one request, listed once
                self.replaced.append(_replaced(self.messages, sent, event))
        elif kind is EventType.LLM_COMPLETE and isinstance(data.get("message"), dict):
            self._partial = None
            self._respond(message_from_dict(data["message"]), "response", event)
        elif kind is EventType.TOOL_RESULT and isinstance(data.get("call_id"), str):
            content = data.get("content", "")
            self._results[data["call_id"]] = ToolResultBlock(
                data["call_id"],
                content if isinstance(content, str) else json.dumps(content, default=str),
                bool(data.get("is_error", False)),
                _images(data.get("images")),
            )
            if data.get("synthetic") is True:
                self._synthetic.add(data["call_id"])
            else:  # the latest result wins: a call a stop had answered ran in a continued run
                self._synthetic.discard(data["call_id"])
        elif kind is EventType.TOOL_START:
            self._started.add(str(data.get("call_id")))
        elif kind is EventType.APPROVAL_REQUIRED:
            self._asked[str(data.get("call_id"))] = dict(data)
        elif kind is EventType.APPROVAL_DECISION:
            self._asked.pop(str(data.get("call_id")), None)
        elif kind is EventType.CONTINUATION:
            # The loop asked a response cut off by max_tokens to go on.
            self._append(Message.user(str(data.get("instruction", ""))), "prompt", event)
        elif kind is EventType.RECURSION:
            blocks = tuple(self._with_images(block_from_dict(block)) for block in data.get("tool_results", ()))
            self._append(Message("user", blocks), "tool_results", event)
            self._pending = []
        elif kind in (EventType.STEER, EventType.SUBAGENT_REPORT):  # a message joined at a turn boundary
            self._prompt(data.get("text"), event, "steer")
        elif kind is EventType.SYSTEM_REMINDER:
            self._prompt(data.get("text"), event)  # part of the prompt's message
        elif kind is EventType.COMPACTION_COMPLETE:
            self._compact(data, event)
        elif kind in (EventType.RETRY, EventType.MODEL_FALLBACK):
            self._partial = None  # the loop drops the failed attempt's response and asks again
        elif kind in (EventType.CANCELLED, EventType.ERROR):
            if kind is EventType.CANCELLED:
                self._kept_open = data.get("keeps_calls_open") is True
            partial = self._partial.build() if self._partial is not None else None
            self._partial = None
            # The loop keeps what was said before the stream stopped; a stop that keeps the turn
            # open was the process dying mid-answer, which leaves nothing, as a crash does.
            if partial is not None and not self._kept_open:
                self._respond(partial, "partial", event)
        elif kind is EventType.RUN_FINISH:
            self._last = event
            if not self._kept_open:  # else the calls stay open until a new prompt answers them
                self.close_dangling()
        self._last = event

    def _prompt(self, prompt: Any, event: AgentEvent, entry_kind: str = "prompt") -> None:
        if prompt is None:
            return
        message = message_from_dict(prompt) if isinstance(prompt, dict) else Message.user(str(prompt))
        if self.current and self.current[-1].message.role == "user" and message.role == "user":
            # Agent._add_user_message: a prompt after tool results joins their message.
            last = self.current.pop()
            message = Message("user", last.message.content + message.content)
        self._append(message, entry_kind, event)

    def _respond(self, message: Message, kind: str, event: AgentEvent) -> None:
        self.close_dangling()
        self._append(message, kind, event)
        self._pending = [block.id for block in message.tool_uses]

    def _set_turn_state(self, value: Any, *, new_turn: bool) -> None:
        if isinstance(value, dict):
            self.turn_state = TurnState.from_dict(value)
            # A run that continues an interrupted turn begins it again: it is one turn, not two.
            if new_turn and not (self.turn_states and self.turn_states[-1].turn_id == self.turn_state.turn_id):
                self.turn_states.append(self.turn_state)

    def _compact(self, data: dict[str, Any], event: AgentEvent) -> None:
        from agent_kernel.context._compaction import compacted_history  # the compactor's own construction

        kept = int(data.get("kept_messages", 0) or 0)
        keep = self.current[len(self.current) - kept :] if kept > 0 else []
        replaced = int(data.get("messages_removed", len(self.current) - len(keep)))
        restored = data.get("restored")
        history = compacted_history(str(data.get("summary", "")), replaced, [entry.message for entry in keep], restored if isinstance(restored, str) else None)
        entries = [Entry(message, "summary", event) for message in history[: len(history) - len(keep)]]
        merged = len(history) == len(keep) and bool(keep)  # the summary joined the first kept message
        if merged:
            entries = [Entry(history[0], "summary", event)]
            keep = keep[1:]
        self.history.extend(entries)
        self.current = [*entries, *keep]
        if self.turn_state is not None and self.turn_state.turn_id == event.turn_id:
            self.turn_state = self.turn_state.with_compacted()
            if self.turn_states and self.turn_states[-1].turn_id == event.turn_id:
                self.turn_states[-1] = self.turn_state

    def interrupted(self) -> Interrupted | None:
        """The turn the journal ends inside, with tool calls waiting for results, or None.

        Call it before ``close_dangling`` (which answers those calls). None when the last run
        ended (``run_finish`` answers every call, unless its stop kept them open: the process was
        going down) or the calls' response never completed. What a stop answered (synthetic
        results) does not count: a stop that never finished, or kept the calls open, was the
        process dying, not an answer.
        """
        if not self._pending or self._last is None or (self._last.type is EventType.RUN_FINISH and not self._kept_open):
            return None
        entry = self.current[-1] if self.current else None
        if entry is None or entry.message.role != "assistant" or [b.id for b in entry.message.tool_uses] != self._pending:
            return None
        answered = {call_id: block for call_id, block in self._results.items() if call_id not in self._synthetic}
        for call_id in self._pending:
            if call_id in self._started and call_id not in answered:
                answered[call_id] = ToolResultBlock(call_id, INTERRUPTED_RESULT, is_error=True)
        approvals = [data for call_id, data in self._asked.items() if call_id in self._pending and call_id not in answered]
        return Interrupted(entry.message, answered, approvals, self._closing(), self.turn_state, entry.event.run_id)

    def _closing(self) -> Message:
        return Message("user", tuple(
            self._results.get(call_id) or ToolResultBlock(call_id, INTERRUPTED_RESULT, is_error=True)
            for call_id in self._pending
        ))

    def close_dangling(self) -> None:
        """Answers tool calls that never reached a ``recursion`` (see the module docstring)."""
        if not self._pending or self._last is None:
            return
        kind = "tool_results" if all(call_id in self._results for call_id in self._pending) else "interrupted"
        self._append(self._closing(), kind, self._last)
        self._pending = []


def rebuild(events: Iterable[AgentEvent]) -> Resumed:
    """Rebuilds the conversation, the last TurnState and the last seq from a run's events.

    Example:
        >>> messages, turn_state, seq = rebuild(read_events(path))  # doctest: +SKIP
    """
    conversation = Conversation()
    for event in events:
        conversation.add(event)
    conversation.close_dangling()
    return Resumed(conversation.messages, conversation.turn_state, conversation.seq)


def replaced_requests(events: Iterable[AgentEvent]) -> list[ReplacedRequest]:
    """The requests ``before_llm_call`` hooks replaced in a session, as they were sent (the
    top-level agent's), oldest first; ``Agent.replaced_requests`` reads its own events.

    Example:
        >>> [r.messages[-1].text for r in replaced_requests(read_events(path))]  # doctest: +SKIP
    """
    conversation = Conversation()
    for event in events:
        conversation.add(event)
    return conversation.replaced


def turn_history(events: Iterable[AgentEvent]) -> list[TurnState]:
    """The TurnState of every turn of the top-level agent, as ``Agent.history`` holds them
    (a turn that compacted the history is marked ``compacted``)."""
    conversation = Conversation()
    for event in events:
        conversation.add(event)
    return conversation.turn_states


class Scan(NamedTuple):
    """What ``scan`` finds in one pass over a journal (``Agent.resume``).

    Attributes:
        resumed: the conversation, last TurnState and last seq (as ``rebuild``).
        turn_states: the TurnState of every top-level turn (as ``turn_history``).
        session_id: the session of the first top-level event (None for an empty journal).
        last_run_start: the last top-level ``run_start`` (None if there is none).
        tail: the last ``keep`` events (all of them when ``keep`` is None).
        total: how many events the journal holds.
        interrupted: the turn the journal ends inside (``Conversation.interrupted``), or None;
            ``resumed.messages`` then ends with its ``closing`` message.
    """

    resumed: Resumed
    turn_states: list[TurnState]
    session_id: str | None
    last_run_start: AgentEvent | None
    tail: list[AgentEvent]
    total: int
    interrupted: Interrupted | None = None


def scan(path: str | os.PathLike[str], keep: int | None = None, observe: Callable[[AgentEvent], None] | None = None) -> Scan:
    """Rebuilds a session from its journal in one pass, holding only the last ``keep`` events.

    A long session's journal can hold millions of events; this reads it line by line, so resuming
    needs memory for the conversation and the tail, not for the whole journal. ``observe`` is
    given every event in order, in the same pass (session memory keeps what it needs from them).

    Raises:
        JournalError: no such file, or a line other than the last is not an event.
    """
    conversation = Conversation()
    subagents = _Subagents()
    tail: deque[AgentEvent] = deque(maxlen=keep)
    session_id: str | None = None
    last_run_start: AgentEvent | None = None
    total = 0
    for event in iter_events(path):
        conversation.add(event)
        subagents.add(event)
        tail.append(event)
        total += 1
        if observe is not None:
            observe(event)
        if event.agent_id is None:
            session_id = session_id or event.session_id
            if event.type is EventType.RUN_START:
                last_run_start = event
    turn_states = list(conversation.turn_states)
    interrupted = subagents.continuing(conversation.interrupted())
    conversation.close_dangling()
    resumed = Resumed(conversation.messages, conversation.turn_state, conversation.seq)
    return Scan(resumed, turn_states, session_id, last_run_start, list(tail), total, interrupted)


@dataclass
class _Child:
    """A sub-agent still running, as ``_Subagents`` follows it."""

    parent: str | None  # the agent that started it (None: the top level)
    conversation: Conversation
    start: dict[str, Any]  # its subagent_start
    before_stop: Conversation | None = None  # as it stood before a stop began to be recorded
    cut: bool = False  # a stop cut it while its lead's call stayed open: it goes on from before_stop
    kept_open: bool = False  # its stop kept its calls open (the process was going down)

    @property
    def to_continue(self) -> Conversation:
        """The conversation it goes on from."""
        return self.before_stop if self.cut and self.before_stop is not None else self.conversation

    def add(self, event: AgentEvent) -> None:
        # A stop is recorded as synthetic results for the calls in flight, ``cancelled``, then a
        # ``run_finish`` of user_interrupt. One that reaches a sub-agent while its lead's call
        # never records an end was the process going down (a kernel restart stops the cell's
        # run first): the sub-agent died at work, so it goes on from before the stop.
        kind = event.type
        stopping = kind is EventType.CANCELLED or (kind is EventType.TOOL_RESULT and event.data.get("synthetic") is True)
        if kind is EventType.CANCELLED:
            self.kept_open = event.data.get("keeps_calls_open") is True
        if stopping and self.before_stop is None:
            self.before_stop = self.conversation.copy()
        elif kind is EventType.RUN_FINISH:
            self.cut = event.data.get("reason") == "user_interrupt" and self.before_stop is not None
        elif not stopping:
            self.before_stop, self.cut = None, False
        self.conversation.add(event)


class _Subagents:
    """The conversations of the sub-agents still running at the end of a journal, each by the
    call that started it, so a turn that died waiting on one can continue it (``SubagentTurn``)."""

    def __init__(self) -> None:
        self._running: dict[str, _Child] = {}  # by agent id
        self._kept_open = False  # the top-level run's stop kept its calls open

    def add(self, event: AgentEvent) -> None:
        kind, agent_id = event.type, event.agent_id
        if agent_id is None:
            # A new prompt closes the open turn (and with it every sub-agent left inside it), and
            # a finished run has none left (unless its stop kept its calls open: the process was
            # going down); only a continued run goes on with them.
            if kind is EventType.CANCELLED:
                self._kept_open = event.data.get("keeps_calls_open") is True
            elif kind is EventType.RUN_START:
                self._kept_open = False
            if (kind is EventType.RUN_FINISH and not self._kept_open) or (kind is EventType.RUN_START and not event.data.get("continues")):
                self._running.clear()
        elif kind is EventType.SUBAGENT_START:
            data = event.data
            parent = data.get("parent_agent_id")
            known = self._running.get(agent_id)  # a continued sub-agent starts again under its id
            conversation = known.to_continue if known is not None else Conversation(agent_id)
            self._running[agent_id] = _Child(parent if isinstance(parent, str) else None, conversation, dict(data))
        elif kind is EventType.SUBAGENT_FINISH:
            child = self._running.get(agent_id)
            if child is not None and not child.kept_open:  # a stop that kept its calls open is no end
                del self._running[agent_id]
        elif agent_id in self._running:
            try:
                self._running[agent_id].add(event)
            except Exception:  # a damaged record of a sub-agent costs its continuation, not the session's resume
                del self._running[agent_id]

    def continuing(self, turn: Interrupted | None, agent_id: str | None = None) -> Interrupted | None:
        """``turn`` with each started call whose sub-agent died inside a turn of its own taken out
        of ``answered`` and kept in ``subagents`` (recursively: a sub-agent's sub-agents too).

        Only a sub-agent started in that very turn counts, and only when it is the call's one
        sub-agent: a call that started several cannot tell them apart, so it stays interrupted.
        """
        if turn is None:
            return None
        turn_id = turn.turn_state.turn_id if turn.turn_state is not None else None
        by_call: dict[str, list[tuple[str, Conversation, dict[str, Any]]]] = {}
        for child_id, child in self._running.items():
            parent, conversation, start = child.parent, child.to_continue, child.start
            call_id = start.get("parent_call_id")
            settled = turn.answered.get(call_id) if isinstance(call_id, str) else None
            if parent != agent_id or settled is None or settled.content != INTERRUPTED_RESULT or start.get("parent_turn_id") != turn_id:
                continue
            by_call.setdefault(str(call_id), []).append((child_id, conversation, start))
        found: dict[str, SubagentTurn] = {}
        for call_id, children in by_call.items():
            if len(children) != 1:
                continue
            child_id, conversation, start = children[0]
            inner = self.continuing(conversation.interrupted(), child_id)
            messages = conversation.messages
            last = conversation.last_event
            # Inside a turn, its calls wait; else its model was answering (messages end with a
            # user message): ask again. It stays interrupted when there is nothing to go on with:
            # its run had ended (only its subagent_finish is missing), its answer was recorded
            # whole, or it was asked to go on from an answer cut off at max_tokens (the part said
            # before is not in the conversation, so asking again would lose it).
            ended = last is not None and last.type is EventType.RUN_FINISH
            if ended or (inner is None and not (messages and messages[-1].role == "user")) or conversation.continuing_a_cut_answer:
                continue
            found[call_id] = SubagentTurn(
                child_id, str(start.get("name") or "subagent"), str(start.get("prompt") or ""), messages,
                conversation.turn_state, last.run_id if last is not None else "", inner,
            )
        if not found:
            return turn
        answered = {call_id: block for call_id, block in turn.answered.items() if call_id not in found}
        return replace(turn, answered=answered, subagents=found)


def iter_events(path: str | os.PathLike[str]) -> Iterator[AgentEvent]:
    """The events of the journal at ``path``, one line at a time (``reader.read_events`` reads all).

    Read by the journal's one line policy (``journal.reader``): a torn last line is skipped with a
    ``TornLineWarning``; damaged lines and events of unknown types are left out, and counted in one
    ``SkippedLinesWarning`` once the file is read.

    Raises:
        JournalError: no such file, or its schema is newer than this version reads.
    """
    try:
        f = open(path, "rb")  # closed by the ``with`` below; opened here so a missing file is named
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None
    count = LineCount()
    with f:
        yield from events_of(iter_records(f, path, count, stacklevel=4), count)
    count.warn(path, stacklevel=4)


def list_sessions(working_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """The session ids that have a journal under ``working_dir`` (default: the current directory)."""
    folder = Path(working_dir if working_dir is not None else Path.cwd()) / SESSIONS_DIR
    return sorted(p.stem for p in folder.glob("*.jsonl"))


def resolve_journal_path(session_id_or_path: str | os.PathLike[str], working_dir: str | os.PathLike[str] | None = None) -> Path:
    """The journal file named by a session id or a path.

    A path (anything with a ``/`` or ending in ``.jsonl``) is taken as is; otherwise the value is
    a session id looked up under ``<working_dir>/.agent_kernel/sessions``, and only when no such
    session exists, a file of that name. The session's own journal comes first: a file named like
    a session in the current folder (which anything able to write the workspace could make, with a
    copy of the real, signed header) never stands in for it.

    Raises:
        JournalError: no such journal; the message lists the sessions that exist.
    """
    if not isinstance(session_id_or_path, (str, os.PathLike)):
        raise JournalError(f"{session_id_or_path!r} names no journal; pass a session id (such as 's_1a2b3c4d5e6f') or a journal path.")
    text = os.fspath(session_id_or_path)
    candidate = Path(text)
    if not isinstance(session_id_or_path, str) or "/" in text or os.sep in text or text.endswith(".jsonl"):
        if candidate.is_file():
            return candidate
        raise JournalError(f"no journal at {candidate}; check the path, or pass a session id.")
    try:
        path = session_path(text, working_dir)
    except JournalError:
        if candidate.is_file():
            return candidate  # a file whose name could not be a session id
        raise
    if path.is_file():
        return path
    if candidate.is_file():
        return candidate
    known = list_sessions(working_dir)
    listing = ", ".join(known[-10:]) if known else "none yet"
    raise JournalError(
        f"no session {text!r} under {path.parent}.{did_you_mean(text, known)} Sessions there: {listing}. "
        "Pass the session id of an earlier run, or the path of its .jsonl journal."
    )


class ForkPoint(NamedTuple):
    """Where a fork begins (``fork_point``).

    Attributes:
        events: every event recorded before the turn began: the fork's history.
        turn_state: the turn as it was recorded; the fork runs it again.
        run_id: the run the turn belonged to.
    """

    events: list[AgentEvent]
    turn_state: TurnState
    run_id: str


def fork_point(events: Sequence[AgentEvent], at: int | str) -> ForkPoint:
    """Splits a session's events at the start of one turn of the top-level agent.

    Args:
        events: the session's events, in order.
        at: a ``turn_id``, or a turn counter (``iteration``) of the session's last run.

    Raises:
        UserError: no such turn; the message lists the turns there are.
    """
    starts = [(i, e) for i, e in enumerate(events) if e.type is EventType.ITERATION_START and e.agent_id is None]
    if isinstance(at, str):
        found = [(i, e) for i, e in starts if e.turn_id == at]
        known = ", ".join(str(e.turn_id) for _, e in starts[-10:])
    else:
        last_run = next((e.run_id for e in reversed(events) if e.type is EventType.RUN_START and e.agent_id is None), None)
        found = [(i, e) for i, e in starts if e.run_id == last_run and e.iteration == at]
        known = ", ".join(str(e.iteration) for _, e in starts if e.run_id == last_run)
    if not found:
        raise UserError(f"no turn {at!r} to fork at. Turns of the last run: {known or 'none'} (or pass a turn_id).")
    index, start = found[0]
    return ForkPoint(list(events[:index]), TurnState.from_dict(start.data["turn_state"]), start.run_id)


def replace_tool_results(events: Iterable[AgentEvent], replacements: Mapping[str, str]) -> list[AgentEvent]:
    """``events`` with the result of each call in ``replacements`` (call_id → text) replaced.

    Both records of a result change: its ``tool_result`` event and its block in ``recursion``,
    so a conversation rebuilt from them holds the new text, as a successful result.

    Raises:
        UserError: a call_id has no recorded result among the events.
    """
    if not replacements:
        return list(events)
    out, seen = [], set()
    for event in events:
        data = event.data
        if event.type is EventType.TOOL_RESULT and data.get("call_id") in replacements:
            seen.add(data["call_id"])
            event = replace(event, data={**data, "content": replacements[data["call_id"]], "is_error": False})
        elif event.type is EventType.RECURSION and any(b.get("tool_use_id") in replacements for b in data.get("tool_results", ())):
            blocks = []
            for block in data["tool_results"]:
                if block.get("tool_use_id") in replacements:
                    seen.add(block["tool_use_id"])
                    block = {**block, "content": replacements[block["tool_use_id"]], "is_error": False}
                blocks.append(block)
            event = replace(event, data={**data, "tool_results": blocks})
        out.append(event)
    missing = sorted(set(replacements) - seen)
    if missing:
        raise UserError(f"no recorded result for tool call {', '.join(missing)} before the fork point; replace_result takes the call_id of a call made before it.")
    return out


def _images(value: Any) -> tuple[ImageBlock, ...]:
    """The images a ``tool_result`` event recorded (none when the key is absent or unreadable)."""
    if not isinstance(value, list):
        return ()
    images = []
    for item in value:
        try:
            images.append(ImageBlock.from_dict(item))
        except (KeyError, TypeError, AttributeError):
            continue  # a damaged record: the result's text still stands
    return tuple(images)
