"""emitter — stamps, redacts and journals events; queues those raised off the loop's path.

The loop calls ``emit`` for what it yields directly (journaled before it is yielded, so a crash
loses nothing already shown). Tools, approvals and compaction run as tasks beside the loop and
call ``later``; the loop drains those between its own events, so one stream carries everything
in order of ``seq``.

A sub-agent's run gets a ``child`` emitter: it shares the session, the ``seq`` counter, the sinks
and the redaction of the top-level emitter, so its events are journaled at once and in order, and
it also queues each event it builds on the top-level emitter, whose loop yields it as it is.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, cast

from agent_kernel.events._event import AgentEvent, EventType, Payload
from agent_kernel.events._sink import EventSink
from agent_kernel.events._turn import TurnState

# Events that end a block of text: a delta held back for redaction is released before them.
_ENDS_TEXT = frozenset(
    {
        EventType.THINKING_DELTA,
        EventType.TOOL_CALL_START,
        EventType.LLM_START,
        EventType.LLM_COMPLETE,
        EventType.RETRY,
        EventType.MODEL_FALLBACK,
        EventType.STALL_DETECTED,
        EventType.ERROR,
        EventType.CANCELLED,
        EventType.RUN_FINISH,
    }
)


# Deltas other than text held back for redaction, by the field holding their text.
_HELD_FIELD: dict[EventType, str] = {EventType.THINKING_DELTA: "text", EventType.TOOL_CALL_DELTA: "delta"}
# Events after which a held thinking or tool-call block has surely ended.
_ENDS_HELD = _ENDS_TEXT | {EventType.TEXT_DELTA, EventType.TOOL_CALL_READY}


class Emitter:
    """Builds ``AgentEvent`` records for one run and writes them to the sinks.

    Args:
        session_id: the conversation's id.
        run_id: this run's id.
        seq: the session's sequence counter (shared across runs so ``seq`` stays monotonic).
        sinks: writers that see every event before it is yielded.
        redact: a function applied to every event's data, or None.
        agent_id: the emitting agent (None for the top level).
    """

    __slots__ = ("session_id", "run_id", "agent_id", "turn", "_seq", "_sinks", "_redact", "_text", "_make_stream", "_held",
                 "_pending", "_wakeup", "_loop", "_loop_thread")

    def __init__(
        self,
        session_id: str,
        run_id: str,
        seq: Iterator[int] | None = None,
        sinks: list[EventSink] | None = None,
        redact: Callable[[Any], Any] | None = None,
        agent_id: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.agent_id = agent_id
        self.turn: TurnState | None = None
        self._seq = seq if seq is not None else itertools.count(1)
        self._sinks = list(sinks or ())
        self._redact = redact
        # Text deltas go through the redactor's stream (when it has one), which holds back the
        # end of a delta that could be the start of a secret: no event holds half a key.
        make_stream = getattr(redact, "stream", None)
        self._text: Any = make_stream() if make_stream is not None else None
        # Thinking and tool-call argument deltas are held back the same way, one stream per
        # block: (type, index) -> [stream, call_id].
        self._make_stream: Any = make_stream
        self._held: dict[tuple[EventType, int], list[Any]] = {}
        # Entries are ``later`` arguments (stamped when drained) or events a child emitter built.
        self._pending: deque[tuple[EventType, Payload, float, TurnState | None] | AgentEvent] = deque()
        self._wakeup: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def emit(self, type: EventType, data: Payload, ts: float | None = None, turn: TurnState | None = None) -> AgentEvent:
        """Creates, redacts and journals one event, returning it for the caller to yield.

        ``data`` is the type's payload (``payloads.X(...)``, checked by mypy against its keys).
        """
        if self._redact is not None:
            if self._held and type not in _HELD_FIELD and type in _ENDS_HELD:
                for key in list(self._held):  # a block ended on a path that did not call release_deltas()
                    last = self._flushed(key)
                    if last is not None:
                        self._record(*last, None, turn)
            text = self._text
            if text is not None and type is EventType.TEXT_DELTA and data.__class__ is dict and len(data) == 1:
                data = {"text": text.feed(data["text"])} if "text" in data else self._redact(data)
            elif type in _HELD_FIELD and self._make_stream is not None:
                data = self._held_delta(type, data)
            else:
                if text is not None and text.held and type in _ENDS_TEXT:
                    # A block ended on a path that did not call release(): its tail is journaled first.
                    self._record(EventType.TEXT_DELTA, {"text": text.flush()}, None, turn)
                data = self._redact(data)
        return self._record(type, data, ts, turn)

    def _held_delta(self, type: EventType, data: Payload) -> Payload:
        """A thinking or tool-call delta, redacted, its text held back where it could start a secret."""
        field = _HELD_FIELD[type]
        values = cast("dict[str, Any]", data)
        if values.__class__ is not dict or not isinstance(values.get(field), str):
            return cast(Payload, self._redact(data))  # type: ignore[misc]
        index = int(values.get("index") or 0)
        key = (type, index)
        entry = self._held.get(key)
        if entry is None:
            entry = self._held[key] = [self._make_stream(), values.get("call_id")]
        shown = entry[0].feed(values[field])
        if type is EventType.THINKING_DELTA and values.get("signature"):  # the signature ends the block
            shown += entry[0].flush()
            del self._held[key]
        rest = {k: v for k, v in values.items() if k != field}
        return cast(Payload, {**(self._redact(rest) if rest else rest), field: shown})  # type: ignore[misc]

    def _flushed(self, key: tuple[EventType, int]) -> tuple[EventType, Payload] | None:
        """The last delta of a held thinking or tool-call block (what its stream still holds), or None."""
        stream, call_id = self._held.pop(key)
        type, index = key
        held = stream.flush()
        if not held:
            return None
        if type is EventType.THINKING_DELTA:
            return type, {"text": held, "signature": None}
        return type, {"call_id": call_id, "index": index, "delta": held}

    @property
    def holding_deltas(self) -> bool:
        """True when the end of a thinking or tool-call delta is held back (it could start a secret)."""
        return bool(self._held)

    def release_deltas(self, keep: tuple[EventType, int] | None = None) -> list[AgentEvent]:
        """Emits what thinking and tool-call blocks hold, except the block ``keep`` (the one the
        next stream event continues); the loop calls it before a stream event of another block."""
        lasts = [self._flushed(key) for key in list(self._held) if key != keep]
        return [self._record(*last, None, None) for last in lasts if last is not None]

    @property
    def holding_text(self) -> bool:
        """True when the end of the last text delta is held back (it could start a secret)."""
        text = self._text
        return text is not None and bool(text.held)

    def release(self) -> AgentEvent:
        """Emits the text held back at the end of a text block (it turned out to start no secret).

        The loop calls it, when ``holding_text``, before the first stream event after a run of
        text deltas, so the concatenated deltas are the block's whole (redacted) text.
        """
        held = self._text.flush() if self._text is not None else ""
        return self._record(EventType.TEXT_DELTA, {"text": held}, None, None)

    def _record(self, type: EventType, data: Payload, ts: float | None, turn: TurnState | None) -> AgentEvent:
        t = turn or self.turn
        event = AgentEvent(
            next(self._seq),
            time.time() if ts is None else ts,
            self.session_id,
            self.run_id,
            t.turn_id if t is not None else None,
            t.parent_turn_id if t is not None else None,
            t.turn_counter if t is not None else 0,
            type,
            cast("dict[str, Any]", data),  # payloads are plain dicts at run time
            self.agent_id,
        )
        for sink in self._sinks:
            sink.write(event)
        return event

    def later(self, type: EventType, data: Payload) -> None:
        """Queues an event raised by a task beside the loop; the loop drains and yields it.

        The timestamp is taken now, so timings stay exact even if the loop yields it later.
        """
        self._pending.append((type, data, time.time(), self.turn))
        self.wake()

    @property
    def has_pending(self) -> bool:
        """True when ``later`` events wait to be drained."""
        return bool(self._pending)

    def drain(self) -> list[AgentEvent]:
        """Emits the queued events, oldest first."""
        out = []
        pending = self._pending
        while pending:
            entry = pending.popleft()
            out.append(entry if entry.__class__ is AgentEvent else self.emit(*entry))  # type: ignore[misc]
        return out

    def wake(self) -> None:
        """Wakes the loop if it is waiting for tasks beside it; safe from any thread.

        Sync tools run in worker threads and report progress from there: an ``asyncio.Event``
        may only be set on its loop's thread, so other threads hand the wake-up to the loop.
        """
        if self._wakeup is None:
            return
        if self._loop is None or threading.get_ident() == self._loop_thread:
            self._wakeup.set()
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wakeup.set)

    async def wait(self) -> None:
        """Waits until ``later`` or ``wake`` is called (returns at once if events are pending)."""
        if self._pending:
            return
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
        self._wakeup.clear()
        await self._wakeup.wait()

    def flush(self) -> None:
        """Flushes every sink (a turn boundary)."""
        for sink in self._sinks:
            sink.flush()

    def sync(self) -> None:
        """Flushes and fsyncs every sink (the end of a run)."""
        for sink in self._sinks:
            sink.sync()

    # -- sub-agents -------------------------------------------------------------------------

    def child(self, run_id: str, agent_id: str) -> Emitter:
        """An emitter for a sub-agent's run (``run_id``, tagged ``agent_id``) inside this one.

        It shares this emitter's session, ``seq`` counter, sinks and redaction; every event it
        emits is also queued, as built, on the top-level emitter, whose loop yields it.
        """
        return _ChildEmitter(self, run_id, agent_id)

    def forward(self, event: AgentEvent) -> None:
        """Queues an event another emitter built and journaled; the loop yields it as it is."""
        self._pending.append(event)
        self.wake()

    def settle(self) -> None:
        """Stamps the ``later`` events waiting now, keeping their place in the queue.

        Called before a child takes a ``seq``, so events queued earlier get the lower numbers and
        the stream stays in ``seq`` order.
        """
        pending = self._pending
        if any(entry.__class__ is not AgentEvent for entry in pending):
            entries = list(pending)
            pending.clear()
            pending.extend(entry if entry.__class__ is AgentEvent else self.emit(*entry) for entry in entries)  # type: ignore[misc]


class _ChildEmitter(Emitter):
    """A sub-agent's emitter: stamps from the shared counter, then forwards to the top level."""

    __slots__ = ("_parent", "_top")
    _top: Emitter

    def __init__(self, parent: Emitter, run_id: str, agent_id: str) -> None:
        top: Emitter = parent._top if isinstance(parent, _ChildEmitter) else parent
        super().__init__(top.session_id, run_id, top._seq, top._sinks, top._redact, agent_id)
        self._parent = parent
        self._top = top

    def emit(self, type: EventType, data: Payload, ts: float | None = None, turn: TurnState | None = None) -> AgentEvent:
        """Creates and journals one event and queues it on the top-level emitter as well."""
        # Events every ancestor queued earlier (the tool_start of the call running this
        # sub-agent, say) take their seq first.
        parent: Emitter | None = self._parent
        while parent is not None:
            if parent._pending:
                parent.settle()
            parent = parent._parent if isinstance(parent, _ChildEmitter) else None
        event = super().emit(type, data, ts, turn)
        self._top.forward(event)
        return event
