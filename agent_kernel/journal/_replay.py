"""journal.replay — yielding recorded events again, with their original pacing or at full speed.

The live view and tests consume a replay exactly like a live ``agent.stream()``: an async
iterator of ``AgentEvent``. Pacing follows the recorded ``ts`` gaps divided by ``speed``, measured
from the start of the replay (so slow consumers do not accumulate drift).
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from agent_kernel.events._event import AgentEvent
from agent_kernel.journal._reader import read_events


async def replay(
    source: str | os.PathLike[str] | Iterable[AgentEvent] | Any,
    speed: float | None = 1.0,
    *,
    max_gap: float | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[AgentEvent]:
    """Yields the events of a journal (or an event list) in order, paced like the original run.

    Args:
        source: a journal path, events, a ``RunResult``, or an agent (all of its session's
            events: those its memory let go are read back from its journal).
        speed: 1.0 replays in real time, 10.0 ten times faster; ``None`` (or ``math.inf``) yields
            as fast as the consumer takes them.
        max_gap: caps each recorded pause (in recorded seconds), so a run that waited an hour
            for an approval replays without the hour.
        sleep, clock: injectable for tests (``asyncio.sleep`` and ``time.monotonic``).

    Raises:
        ValueError: ``speed`` is zero or negative.

    Example:
        >>> async for event in replay("session.jsonl", speed=4):  # doctest: +SKIP
        ...     print(event.type, event.data)
    """
    if speed is not None and not speed > 0:
        raise ValueError(f"speed must be positive (or None for no pacing), got {speed!r}")
    source = getattr(source, "events", source)  # an agent or a RunResult: its events
    # An agent's EventLog: the journal's path once memory let events go (see journal.event_log).
    as_source = getattr(source, "as_source", None)
    if as_source is not None:
        source = as_source()
    events = read_events(source) if isinstance(source, (str, os.PathLike)) else list(source)
    paced = speed is not None and not math.isinf(speed)
    started = clock()
    offset = 0.0  # recorded seconds since the first event, after capping gaps
    previous: float | None = None
    for event in events:
        if paced and previous is not None:
            gap = max(0.0, event.ts - previous)
            offset += gap if max_gap is None else min(gap, max_gap)
            delay = started + offset / speed - clock()  # type: ignore[operator]
            if delay > 0:
                await sleep(delay)
        previous = event.ts
        yield event
