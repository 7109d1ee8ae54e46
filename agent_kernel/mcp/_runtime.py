"""mcp.runtime — the loops MCP connections live on, and calls from one loop to another.

The SDK's transports keep anyio task groups open for the life of a connection, and those must be
entered and left on one event loop. A connection started from a long-lived loop (a notebook
kernel's, an application's ``asyncio.run(main())``) lives on that loop, so a tool call is a plain
``await`` there. A connection started from a loop that ends with the call (``run_sync`` makes a
fresh one per call, see ``blocking.SHORT_LIVED_LOOP``) lives instead on a loop of its own in a
daemon thread, started on first use. From any other loop, ``call_on`` reaches a connection's loop
(cancellation included: cancelling the caller cancels the task there, and the SDK then sends the
MCP cancellation); ``run_on`` does it from synchronous code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Runtime:
    """An event loop running in a daemon thread, started on first use."""

    def __init__(self, name: str = "agent_kernel-mcp") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, started if needed."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name=self._name, daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    @property
    def started(self) -> bool:
        """True while the thread is running."""
        return self._loop is not None and not self._loop.is_closed()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedules ``coro`` on the runtime's loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs ``coro`` on the runtime's loop and awaits it from the caller's loop."""
        return await self.call_on(self.loop, coro)

    @staticmethod
    async def call_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
        """Runs ``coro`` on ``loop`` (running, in another thread) and awaits it from the caller's loop.

        Cancelling the awaiting task cancels ``coro`` too. Two ``call_soon_threadsafe`` hops and
        no ``concurrent.futures`` lock: this sits on MCP tool calls made across loops.
        """
        caller = asyncio.get_running_loop()
        if caller is loop:
            return await coro
        answer: asyncio.Future[T] = caller.create_future()
        running: list[asyncio.Task[T]] = []

        def settle(task: asyncio.Task[T]) -> None:
            if answer.done():
                return
            if task.cancelled():
                answer.cancel()
            elif task.exception() is not None:
                answer.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                answer.set_result(task.result())

        def done(task: asyncio.Task[T]) -> None:
            try:
                caller.call_soon_threadsafe(settle, task)
            except RuntimeError:  # the caller's loop has closed; nobody is waiting
                task.exception() if not task.cancelled() else None

        def start() -> None:
            task = loop.create_task(coro)
            running.append(task)
            task.add_done_callback(done)

        loop.call_soon_threadsafe(start)
        try:
            return await answer
        except asyncio.CancelledError:
            def cancel() -> None:
                if running:
                    running[0].cancel()
                else:  # not started yet: start() runs first (FIFO), so this is unreachable
                    coro.close()

            loop.call_soon_threadsafe(cancel)
            raise

    def run_on(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None], timeout: float | None = None) -> None:
        """Runs ``coro`` on ``loop`` from synchronous code, waiting for it where that cannot deadlock.

        ``loop`` running in another thread: waits (up to ``timeout``). Running in this thread (a
        synchronous call inside a coroutine): schedules it, since waiting would block the loop it
        needs. Idle in this thread's hands (no loop running here): runs it to completion there.
        Closed: its tasks were already ended with it, so there is nothing to run.
        """
        if loop.is_closed():
            coro.close()
            return
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is here:
            loop.create_task(coro)
        elif loop.is_running():
            asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)
        elif here is None:
            loop.run_until_complete(coro)
        else:  # idle, and another loop runs here: it runs when its owner runs it next
            loop.call_soon_threadsafe(loop.create_task, coro)

    def call_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Runs ``coro`` on the runtime's loop and blocks until it ends (never from the runtime's own thread)."""
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        """Stops the loop and joins the thread; the runtime starts again on next use."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)
            if not thread.is_alive():
                loop.close()
