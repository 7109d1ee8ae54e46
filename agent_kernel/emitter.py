"""emitter — stamps, redacts and journals events; queues those raised off the loop's path.

The loop calls ``emit`` for what it yields directly (journaled before it is yielded, so a crash
loses nothing already shown). Tools, approvals and compaction run as tasks beside the loop and
call ``later``; the loop drains those between its own events, so one stream carries everything
in order of ``seq``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from .events import AgentEvent, EventType
from .state import TurnState

__all__ = ["Emitter", "EventSink"]


class EventSink:
    """What the emitter writes every event to before it is yielded (the journal is one).

    Subclasses override what they need; every method is a no-op here.
    """

    def write(self, event: AgentEvent) -> None:
        """Records one event (called on the hot path: keep it cheap)."""

    def flush(self) -> None:
        """Makes written events durable enough to survive the process (turn boundaries)."""

    def sync(self) -> None:
        """Flushes and fsyncs (end of a run)."""

    def close(self) -> None:
        """Releases the sink."""


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

    __slots__ = ("session_id", "run_id", "agent_id", "turn", "_seq", "_sinks", "_redact", "_pending", "_wakeup")

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
        self._pending: deque[tuple[EventType, dict[str, Any], float, TurnState | None]] = deque()
        self._wakeup: asyncio.Event | None = None

    def emit(self, type: EventType, data: dict[str, Any], ts: float | None = None, turn: TurnState | None = None) -> AgentEvent:
        """Creates, redacts and journals one event, returning it for the caller to yield."""
        if self._redact is not None:
            data = self._redact(data)
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
            data,
            self.agent_id,
        )
        for sink in self._sinks:
            sink.write(event)
        return event

    def later(self, type: EventType, data: dict[str, Any]) -> None:
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
            type, data, ts, turn = pending.popleft()
            out.append(self.emit(type, data, ts, turn))
        return out

    def wake(self) -> None:
        """Wakes the loop if it is waiting for tasks beside it."""
        if self._wakeup is not None:
            self._wakeup.set()

    async def wait(self) -> None:
        """Waits until ``later`` or ``wake`` is called (returns at once if events are pending)."""
        if self._pending:
            return
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
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
