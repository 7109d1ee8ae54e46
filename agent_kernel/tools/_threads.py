"""tools.threads — synchronous tool work in threads the loop can walk away from.

A sync tool (or the ``python`` tool's snippet) runs in a daemon thread of its own rather than in
the event loop's default executor: ``asyncio.run`` joins the default executor's threads when it
ends, so one blocking call would hold ``run`` / ``run_sync`` until it returned, cancel or not.
Here a cancelled await ends at once; the thread is abandoned (Python cannot kill a thread) and,
while it is still alive, it is named in the ``cancelled`` event's ``still_running``.

The executor marks each tool call's task with a list (``track_threads``) that the threads it
starts are added to, so the loop can tell which cancelled calls left work running.

A thread started with ``interrupt=True`` (the ``python`` tool) also gets a ``KeyboardInterrupt``
raised inside it when its await is cancelled, as Ctrl-C would in a notebook. CPython delivers it
at the thread's next bytecode, so a loop of Python code stops; a long C call (``time.sleep``, a
blocking read) only notices when it returns.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: After an interrupt, how long a cancelled call waits for its thread to unwind before it is
#: reported as still running (the wait ends as soon as the thread does).
INTERRUPT_GRACE_S = 1.0



class ToolThread:
    """One thread ``run_in_thread`` started; ``running`` until its function has returned."""

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread
        self.finished = threading.Event()

    @property
    def running(self) -> bool:
        """True while the function has not returned (or raised)."""
        return not self.finished.is_set()


_tracked: contextvars.ContextVar[list[ToolThread] | None] = contextvars.ContextVar("agent_kernel_tool_threads", default=None)


def track_threads(threads: list[ToolThread]) -> None:
    """Adds every thread ``run_in_thread`` starts from the current task (and its children) to ``threads``."""
    _tracked.set(threads)


def _deliver(future: asyncio.Future[Any], outcome: BaseException | None, value: Any) -> None:
    if future.done():  # cancelled: nobody waits for this result any more
        return
    if outcome is not None:
        future.set_exception(outcome)
    else:
        future.set_result(value)


class _Interruptible:
    """Raises ``KeyboardInterrupt`` in a thread, only while it runs the tool's own code."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ident: int | None = None  # set while the function runs, cleared when it returns

    def interrupt(self) -> bool:
        with self.lock:
            if self.ident is None:
                return False
            hit = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.ident), ctypes.py_object(KeyboardInterrupt))
            return bool(hit == 1)


async def run_in_thread(function: Callable[[], T], *, name: str = "tool", interrupt: bool = False) -> T:
    """Runs ``function()`` in a new daemon thread and awaits its result.

    Args:
        function: the blocking work, with its arguments bound (``functools.partial``): a tool's
            own arguments may be called anything, ``name`` included.
        name: names the thread (``tool:NAME``), for debuggers and ``threading.enumerate()``.
        interrupt: on cancellation, raise ``KeyboardInterrupt`` inside the thread and give it up
            to ``INTERRUPT_GRACE_S`` to unwind.

    Raises:
        asyncio.CancelledError: the await was cancelled; the thread may still be running.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    ended: asyncio.Future[None] = loop.create_future()  # the thread is gone, whatever its result
    context = contextvars.copy_context()
    guard = _Interruptible() if interrupt else None

    def work() -> None:
        outcome: BaseException | None = None
        value: Any = None
        try:
            if guard is not None:
                with guard.lock:
                    guard.ident = threading.get_ident()
            try:
                value = context.run(function)
            finally:
                if guard is not None:
                    with guard.lock:
                        guard.ident = None
        except Exception as exc:  # handed to the awaiting task, which re-raises it
            outcome = exc
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: raised in a task they would stop the loop
            outcome = RuntimeError(f"the tool's thread ended with {type(exc).__name__}: {exc}")
        record.finished.set()
        try:
            loop.call_soon_threadsafe(_deliver, future, outcome, value)
            loop.call_soon_threadsafe(_deliver, ended, None, None)
        except RuntimeError:  # the loop has closed: the run ended without this result
            pass

    thread = threading.Thread(target=work, name=f"tool:{name}", daemon=True)
    record = ToolThread(thread)
    tracked = _tracked.get()
    if tracked is not None:
        tracked.append(record)
    thread.start()
    try:
        return await future
    except asyncio.CancelledError:
        if guard is not None and guard.interrupt():
            # The snippet is told to stop; wait for it (not past the grace) so the report is exact.
            await asyncio.wait({ended}, timeout=INTERRUPT_GRACE_S)
        raise
