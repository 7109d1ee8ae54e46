"""tools.executor — StreamingToolExecutor: runs tool calls while the model is still streaming.

Each call is submitted the moment its tool_use block completes. Concurrency-safe calls start at
once and run in parallel (bounded); an unsafe call waits until nothing else runs, then runs
alone, and calls after it wait for it, so order-sensitive work keeps the model's order. Results
are returned in the model's declared order whatever order they finish in.

A batch can close before all its calls have run: when a call ends the run (its result has
``stop``), or fails with ``on_error="cancel"``, the calls not started yet never start and each
gets a result saying why (``close``); calls already running finish. A call submitted to a closed
batch is answered at once the same way.

A cancelled call ends at once even when its sync work cannot stop: each call records the threads
it started (``tools.threads``), and ``still_running`` names the calls that left one behind.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_kernel.tools._threads import ToolThread, track_threads
from agent_kernel.tools._tool import ToolResult

ABORT_USER = "user interrupted"
ABORT_SIBLING = "a sibling tool call failed"
ABORT_STOPPED = "the run was ended by"  # + the tool that ended it
ABORT_FALLBACK = "model fell back"
ABORT_RETRY = "the model response was retried"


@dataclass(eq=False)
class PendingCall:
    """One submitted tool call and, once finished, its result."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    index: int
    safe: bool
    parse_error: str | None = None
    result: ToolResult | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    abort_reason: str | None = None
    threads: list[ToolThread] = field(default_factory=list, repr=False)  # sync work it started

    @property
    def still_running(self) -> bool:
        """True when the call has a result (say, cancelled) but a thread it started goes on."""
        return any(t.running for t in self.threads)


RunCall = Callable[[PendingCall], Awaitable[ToolResult]]


class StreamingToolExecutor:
    """Schedules tool calls as they stream in.

    Args:
        run_call: runs one call to completion and returns its result (validation, approval
            and the tool itself live there).
        is_safe: whether the named tool may run beside others.
        max_concurrency: how many concurrency-safe calls may run at once.
        on_change: called whenever a call finishes (the loop uses it to wake up).
        on_abort: called with each call that receives a synthetic result from ``abort_all``
            or ``close``.
        cancels_on_error: whether a failed call of the named tool closes the batch (its
            siblings not started yet never start). None: no tool does.
    """

    def __init__(
        self,
        run_call: RunCall,
        *,
        is_safe: Callable[[str], bool],
        max_concurrency: int = 10,
        on_change: Callable[[], None] | None = None,
        on_abort: Callable[[PendingCall], None] | None = None,
        cancels_on_error: Callable[[str], bool] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self._run_call = run_call
        self._is_safe = is_safe
        self._max = max_concurrency
        self._on_change = on_change
        self._on_abort = on_abort
        self._cancels_on_error = cancels_on_error
        self.closed: str | None = None  # why the batch closed: later calls never start
        self.calls: list[PendingCall] = []
        self._queue: deque[PendingCall] = deque()
        self._running: set[PendingCall] = set()
        self._unsafe_running = False
        # Calls without a result yet: ``done`` is asked on every wake-up of the loop, so it is
        # a counter, not a scan of every call of the turn (quadratic in a turn of many calls).
        self._open = 0

    def submit(self, call_id: str, name: str, arguments: dict[str, Any], *, parse_error: str | None = None) -> PendingCall:
        """Queues a call and starts it if the scheduling rules allow."""
        call = PendingCall(call_id, name, arguments, len(self.calls), self._is_safe(name), parse_error)
        self.calls.append(call)
        self._open += 1
        if self.closed is not None:
            self._answer_unstarted(call, self.closed)
            return call
        self._queue.append(call)
        self._pump()
        return call

    def record(self, call_id: str, name: str, arguments: dict[str, Any], result: ToolResult) -> PendingCall:
        """Adds a call that already has its result (one answered before a run was interrupted),
        keeping its place in the declared order without running it again."""
        call = PendingCall(call_id, name, arguments, len(self.calls), self._is_safe(name), result=result)
        self.calls.append(call)
        return call

    @property
    def done(self) -> bool:
        """True when every submitted call has a result."""
        return self._open == 0

    @property
    def running(self) -> int:
        """How many calls are running now."""
        return len(self._running)

    def results(self) -> list[PendingCall]:
        """The calls in declared order (each with its result once done)."""
        return list(self.calls)

    def _pump(self) -> None:
        queue = self._queue
        while queue:
            call = queue[0]
            if call.safe:
                if self._unsafe_running or len(self._running) >= self._max:
                    return
            elif self._running:
                return
            queue.popleft()
            self._start(call)
            if not call.safe:
                return

    def _start(self, call: PendingCall) -> None:
        self._running.add(call)
        if not call.safe:
            self._unsafe_running = True
        call.task = asyncio.get_running_loop().create_task(self._run(call), name=f"tool:{call.name}:{call.call_id}")

    async def _run(self, call: PendingCall) -> None:
        track_threads(call.threads)  # this task's own context: only this call's threads land here
        try:
            call.result = await self._run_call(call)
        except asyncio.CancelledError:
            reason = call.abort_reason or ABORT_USER
            call.result = ToolResult(f"Tool call not completed: {reason}.", is_error=True)
            if self._on_abort is not None:
                self._on_abort(call)
        except BaseException as exc:  # run_call turns tool failures into results; this is a bug guard
            call.result = ToolResult(f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        else:
            result = call.result
            if result.stop:
                self.close(f"{ABORT_STOPPED} {call.name}")
            elif result.is_error and self._cancels_on_error is not None and self._cancels_on_error(call.name):
                self.close(f"{ABORT_SIBLING} ({call.name})")
        finally:
            self._open -= 1
            self._running.discard(call)
            if not call.safe:
                self._unsafe_running = False
            self._pump()
            if self._on_change is not None:
                self._on_change()

    def close(self, reason: str) -> None:
        """Closes the batch: queued calls, and any submitted later, never start and are answered
        with ``reason``; running calls finish. The first reason given is kept."""
        if self.closed is None:
            self.closed = reason
        while self._queue:
            self._answer_unstarted(self._queue.popleft(), reason)

    def _answer_unstarted(self, call: PendingCall, reason: str) -> None:
        call.abort_reason = reason
        call.result = ToolResult(f"Tool call not started: {reason}.", is_error=True)
        self._open -= 1
        if self._on_abort is not None:
            self._on_abort(call)

    def abort_all(self, reason: str) -> None:
        """Gives queued calls a synthetic error result and cancels running ones with ``reason``."""
        while self._queue:
            call = self._queue.popleft()
            call.abort_reason = reason
            call.result = ToolResult(f"Tool call not completed: {reason}.", is_error=True)
            self._open -= 1
            if self._on_abort is not None:
                self._on_abort(call)
        for call in list(self._running):
            if call.task is not None and not call.task.done():
                call.abort_reason = reason
                call.task.cancel()

    def still_running(self) -> list[dict[str, str]]:
        """The calls whose threads go on after they were cancelled: ``[{"call_id", "name"}]``."""
        return [{"call_id": c.call_id, "name": c.name} for c in self.calls if c.still_running]

    async def aclose(self) -> None:
        """Waits for cancelled tasks to finish their cleanup."""
        tasks = [c.task for c in self.calls if c.task is not None and not c.task.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
