"""sink — what receives a run's events: the journal, a recorder, an exporter."""

from __future__ import annotations

from typing import Protocol

from agent_kernel.events._event import AgentEvent


class _Appendable(Protocol):
    """Where an ``EventRecorder`` puts events: a list, or an ``EventLog``."""

    def append(self, event: AgentEvent, /) -> None: ...


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


class EventRecorder(EventSink):
    """Appends every event to a list or to an agent's ``EventLog`` (``agent.events``), so
    DataFrames work on a run in progress.

    The log decides how much stays in memory (``journal.event_log``); the recorder only appends,
    so recording stays one call per event on the loop's hot path.
    """

    def __init__(self, events: _Appendable) -> None:
        self.events = events
        # Bound once: an EventLog's append is its list's own, so a write is one C call.
        self._append = events.append

    def write(self, event: AgentEvent) -> None:
        """Appends the event."""
        self._append(event)
