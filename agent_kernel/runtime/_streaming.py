"""streaming — what the loop needs around one streamed call: watching for a stalled stream,
phrasing a validation failure for the model, and the backoff between attempts.

The response itself is assembled by ``models._response.ResponseBuilder``.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pydantic


class Watchdog:
    """Interrupts the stream when the model has been silent for ``timeout`` seconds.

    ``touch`` records that something arrived: a stream event, or any bytes at all (keep-alive
    pings included, through ``models.transport.on_stream_activity``). The loop also touches it
    when it goes back to the stream after handing an event to its consumer, so the deadline
    measures the model's silence alone: time a consumer spends holding an event is not silence,
    and a check that falls while the loop is with its consumer (the token not armed) waits for
    it to come back instead of giving up. Time is the event loop's clock, so a test loop with a
    fake clock decides stalls exactly.
    """

    __slots__ = ("timeout", "token", "last", "_handle", "_loop")

    def __init__(self, timeout: float, token: Any) -> None:
        self.timeout = timeout
        self.token = token
        self._loop = asyncio.get_running_loop()
        self.last = self._loop.time()
        self._handle: asyncio.TimerHandle | None = self._loop.call_later(timeout, self._check)

    def touch(self) -> None:
        """Something arrived, or the loop is waiting on the model again: the silence starts from now."""
        self.last = self._loop.time()

    def _check(self) -> None:
        idle = self._loop.time() - self.last
        if idle < self.timeout:
            self._handle = self._loop.call_later(self.timeout - idle, self._check)
        elif self.token.armed:
            self._handle = None
            self.token.interrupt("stall")
        else:
            # The loop is with its consumer, not waiting on the model: look again a full timeout
            # later (the loop touches the watchdog when it comes back, so a stall is still seen).
            self._handle = self._loop.call_later(self.timeout, self._check)

    def stop(self) -> None:
        """Stops watching (the stream ended)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def validation_summary(exc: pydantic.ValidationError) -> str:
    """The first few validation errors, phrased for the model to correct its call."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts) + ". Call the tool again with arguments that match its schema."


def backoff(attempt: int, base: float, cap: float, retry_after: float | None) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): exponential with jitter, never past ``cap``.

    A server's ``retry-after`` replaces the exponential delay, but ``cap`` bounds it too: a 429
    asking for an hour must not hold a notebook cell for an hour (the ``retry`` event says what
    the server asked for).
    """
    if retry_after is not None:
        return min(max(retry_after, 0.0), cap)
    delay = min(cap, base * (2**attempt))
    return delay / 2 + random.random() * delay / 2


