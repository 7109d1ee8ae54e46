"""journal.event_log — a session's events by position: the recent ones in memory, older ones read back from the journal.

``agent.events`` is an ``EventLog``. Every event recorded goes to the journal and to the log; the
log holds the current run's events and the ``keep`` events before them (``Agent(keep_events=N)``,
``DEFAULT_KEEP_EVENTS`` by default, ``None`` for all) and lets the older ones go, so a long
session's memory stays bounded while its journal keeps everything. An event takes 0.5 to 1.5 KB
of memory (more with large tool results), so the default window costs 5 to 15 MB plus the current
run (figures: ``benchmarks/long_session.py``).

Positions never move: ``len(log)`` counts every event of the session (those resumed from its
journal included), ``log[i]`` is the i-th event, and ``log[n:]`` the events recorded since the
log was ``n`` long. Events still held come from memory; reaching older positions (an index, a
slice, iteration) flushes the journal and reads them back from it, one pass over the file per
call; a walk backwards (``reversed``) reads it only if it goes on past the events held, so a
question about the recent past (the last ``run_start``, an approval still open) costs nothing. Whole-session readers (the frames, replay, the timeline) call ``as_source``, which gives the
journal's path once the log has let events go, so they use the fast file readers.

Without a journal the older events are gone: iteration and slices give the held ones, indexing
a forgotten position raises ``IndexError``, and ``as_source`` warns with
``EventsForgottenWarning``, naming how to keep them.

Trimming happens only when a run starts (``begin_run``), never per event, so recording an event
stays one ``list.append`` on the loop's hot path, and a run in progress is always held whole.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from agent_kernel.errors import JournalError, UserError
from agent_kernel.events._event import AgentEvent
from agent_kernel.journal._reader import read_events

#: Events held from before the current run when ``Agent(keep_events=...)`` is not given.
DEFAULT_KEEP_EVENTS = 10_000


class EventsForgottenWarning(UserWarning):
    """A session's earlier events were let go from memory and no journal holds them."""


class EventLog(Sequence[AgentEvent]):
    """Every event of a session by position, the recent ones held in memory (see the module docstring).

    Args:
        keep: events held from before the current run; ``None`` holds every event.
        journal: the ``Journal`` (anything with a ``path`` and ``flush()``) that records the same
            events, or None; older events are read back from it. Settable later.

    Raises:
        UserError: ``keep`` is negative.

    Example:
        >>> log = EventLog(keep=2)
        >>> len(log), log.held_from
        (0, 0)
    """

    append: Callable[[AgentEvent], None]

    def __init__(self, keep: int | None = DEFAULT_KEEP_EVENTS, journal: Any = None) -> None:
        if keep is not None and keep < 0:
            raise UserError(f"keep_events must be 0 or more, or None to keep every event in memory (got {keep}).")
        self.keep = keep
        self.journal = journal
        self._held: list[AgentEvent] = []
        self._dropped = 0
        # The hot path: recording an event is the list's own append, no Python frame in between.
        self.append = self._held.append

    # -- the window ------------------------------------------------------------------------

    @property
    def held(self) -> list[AgentEvent]:
        """The events in memory (positions ``held_from`` to the end), as a new list."""
        return self._held[:]

    @property
    def held_from(self) -> int:
        """The position of the oldest event in memory (0 while nothing was let go)."""
        return self._dropped

    @property
    def complete(self) -> bool:
        """True while every event of the session is in memory."""
        return self._dropped == 0

    def begin_run(self) -> None:
        """Lets go of the events beyond the ``keep`` most recent: the agent calls it as a run starts."""
        if self.keep is None:
            return
        excess = len(self._held) - self.keep
        if excess > 0:
            # In place: ``append`` is bound to this list.
            del self._held[:excess]
            self._dropped += excess

    def load(self, events: Sequence[AgentEvent], total: int | None = None) -> None:
        """Replaces the log with a session's events (resumed or forked), holding the ``keep`` most recent.

        Args:
            events: the session's events, or only its last ones when ``total`` is given.
            total: how many events the session holds, when ``events`` are only its last ones
                (the rest are read back from the journal).
        """
        held = events if self.keep is None or len(events) <= self.keep else events[len(events) - self.keep :]
        self._held[:] = held
        self._dropped = (len(events) if total is None else total) - len(held)

    def release(self) -> None:
        """Lets go of every held event (a session the agent left); they stay readable from the journal."""
        self._dropped += len(self._held)
        self._held.clear()

    def clear(self) -> None:
        """Forgets every event: the log starts empty again."""
        self._held.clear()
        self._dropped = 0

    # -- reading ---------------------------------------------------------------------------

    @property
    def journaled(self) -> bool:
        """True when a journal file keeps every event, so those let go can be read back."""
        return getattr(self.journal, "path", None) is not None

    def journal_path(self) -> Path | None:
        """The journal's path, flushed so it holds every event recorded so far; None without one."""
        journal = self.journal
        path = getattr(journal, "path", None)
        if path is None:
            return None
        journal.flush()  # the loop flushes at turn boundaries; a reader needs the events since
        return Path(path)

    def as_source(self) -> Any:
        """What a whole-session reader should read: this log while it holds every event, else the
        journal's path, else (no journal) the held events as a list, with an ``EventsForgottenWarning``."""
        if not self._dropped:
            return self
        path = self.journal_path()
        if path is not None:
            return path
        warnings.warn(EventsForgottenWarning(self._forgotten_message()), stacklevel=3)
        return self._held[:]

    def _forgotten_message(self) -> str:
        return (
            f"{self._dropped:,} earlier events of this session are no longer in memory and there is no "
            f"journal to read them from, so only the last {len(self._held):,} are here. Keep more with "
            "Agent(keep_events=N) (None keeps every event), or keep a journal (leave journal= at its "
            "default, or pass a path)."
        )

    def _older(self, first: AgentEvent | None = None) -> list[AgentEvent] | None:
        """The events let go (positions 0 to ``held_from``), read back from the journal; None without one.

        ``first``: the oldest held event as the caller saw it (default: the oldest held now).
        """
        dropped = self._dropped
        if not dropped:
            return []
        path = self.journal_path()
        if path is None:
            return None
        if first is None and self._held:
            first = self._held[0]
        records = read_events(path)
        end = len(records)
        if first is not None:
            # Aligned on the oldest held event, so events recorded while reading (a run on another
            # thread) and records from before this log (a journal reopened) cannot shift positions.
            end = next((i for i in range(len(records) - 1, -1, -1) if records[i].seq == first.seq and records[i].run_id == first.run_id), -1)
        if end < dropped:
            raise JournalError(
                f"{path} does not hold the {dropped:,} events this agent let go from memory (was the file "
                "replaced or cut?); read the journal directly, or keep more with Agent(keep_events=N)."
            )
        return records[end - dropped : end]

    def _snapshot(self) -> list[AgentEvent]:
        """Every event available: read back from the journal and held (held only without a journal)."""
        held = self._held[:]  # first: an event recorded meanwhile must not shift the alignment
        older = self._older() if self._dropped else []
        return held if older is None else older + held

    def __len__(self) -> int:
        return self._dropped + len(self._held)

    @overload
    def __getitem__(self, index: int) -> AgentEvent: ...

    @overload
    def __getitem__(self, index: slice) -> list[AgentEvent]: ...

    def __getitem__(self, index: int | slice) -> AgentEvent | list[AgentEvent]:
        dropped = self._dropped
        held = self._held
        if isinstance(index, slice):
            positions = range(*index.indices(dropped + len(held)))
            if not positions:
                return []
            if positions.step == 1 and positions.start >= dropped:
                return held[positions.start - dropped : positions.stop - dropped]
            older = self._older() if min(positions[0], positions[-1]) < dropped else []
            if older is None:  # no journal: the held part of the range
                return [held[p - dropped] for p in positions if p >= dropped]
            return [older[p] if p < dropped else held[p - dropped] for p in positions]
        i = operator.index(index)
        n = dropped + len(held)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"event index {index} out of range: this session has {n:,} events")
        if i >= dropped:
            return held[i - dropped]
        older = self._older()
        if older is None:
            raise IndexError(f"event {i:,} is gone: {self._forgotten_message()}")
        return older[i]

    def __iter__(self) -> Iterator[AgentEvent]:
        return iter(self._snapshot() if self._dropped else self._held[:])

    def __reversed__(self) -> Iterator[AgentEvent]:
        if not self._dropped:
            return reversed(self._held[:])
        return self._reversed_then_older()

    def _reversed_then_older(self) -> Iterator[AgentEvent]:
        """Newest first: the held events, then (only if the walk goes on past them) the older ones
        read back from the journal, so a walk that stops in the recent past never reads it."""
        held = self._held[:]
        yield from reversed(held)
        older = self._older(held[0] if held else None)
        if older is not None:
            yield from reversed(older)

    def __contains__(self, value: object) -> bool:
        return value in self._held or (bool(self._dropped) and value in self._snapshot())

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """The position of the first event equal to ``value`` (one read of the journal at most)."""
        return self._snapshot().index(value, start, len(self) if stop is None else stop) if self._dropped else self._held.index(value, start, len(self) if stop is None else stop)

    def count(self, value: Any) -> int:
        """How many events equal ``value``."""
        return (self._snapshot() if self._dropped else self._held).count(value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (EventLog, EventSlice, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"EventLog({len(self):,} events, {len(self._held):,} in memory, keep={self.keep!r})"

    def view(self, start: int, stop: int) -> EventSlice:
        """The events at positions ``start`` to ``stop``, read when used (``RunResult.events``)."""
        return EventSlice(self, start, stop)


class EventSlice(Sequence[AgentEvent]):
    """A fixed range of an ``EventLog`` (one run's events), served from memory while held there,
    else read back from the journal; it holds no events itself.

    Args:
        log: the session's log.
        start, stop: the range of positions.
    """

    def __init__(self, log: EventLog, start: int, stop: int) -> None:
        self._log = log
        self._start = start
        self._stop = stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> AgentEvent: ...

    @overload
    def __getitem__(self, index: slice) -> list[AgentEvent]: ...

    def __getitem__(self, index: int | slice) -> AgentEvent | list[AgentEvent]:
        positions = range(self._start, self._stop)[index]
        if not isinstance(positions, range):
            return self._log[positions]
        if positions.step == 1:
            return self._log[positions.start : positions.stop]
        return list(self)[index]  # a stepped slice: rare, read the run once

    def __iter__(self) -> Iterator[AgentEvent]:
        return iter(self._log[self._start : self._stop])

    def __reversed__(self) -> Iterator[AgentEvent]:
        return reversed(self._log[self._start : self._stop])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (EventLog, EventSlice, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[list[AgentEvent]], tuple[list[AgentEvent]]]:
        # Pickled or deep-copied, a slice becomes the list of its events: a journal cannot travel.
        return (list, (list(self),))

    def __repr__(self) -> str:
        return f"EventSlice(positions {self._start:,} to {self._stop:,} of {self._log!r})"
