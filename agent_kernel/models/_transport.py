"""models.transport — what the SDK adapters share below the API: clients per event loop, and
the bytes-arrived signal the stall watchdog listens to.

**A client per event loop.** An SDK's async client pools HTTP connections, and a pooled
connection belongs to the event loop that opened it. ``asyncio.run`` closes its loop at the end,
so a client kept from one ``run_sync`` fails on the next ("Event loop is closed"), or sends its
request twice while it notices. ``LoopBound`` hands each running loop a client of its own, built
by the adapter the first time that loop asks. When a loop shuts down (``asyncio.run`` ending, as
after every ``run_sync``), its client is closed on it, so no pooled connection outlives its loop
unclosed: each client is paired with a suspended async generator the loop knows about, and a
loop's shutdown closes every such generator (``loop.shutdown_asyncgens``), which closes the client.

**A dropped adapter closes its clients too.** An agent dropped while its loop runs (a notebook
cell that builds a new ``Agent`` over the old one) is usually freed by the cycle collector, which
runs the finalizers of everything it frees at once: the pooled sockets would be torn down there,
unclosed, before the client could close them. So the generators are not held by the adapter
alone: a ``weakref.finalize`` holds them until the adapter is gone and then lets go, outside the
garbage, and each running loop closes its abandoned generator (and with it the client) as it
closes any other. A client still open then (its loop still runs: a notebook's) gets a
``ResourceWarning``, as an unclosed file does; ``close()`` (``Agent.close``) closes the clients
an adapter made, each on its own loop, so none is left for the collector.

**Stream activity.** The SDKs swallow keep-alive traffic (Anthropic's ``ping`` events, SSE
comment lines), so an adapter never sees it, yet a server that sends it is alive. Adapters hook
``watch_stream_activity`` onto their HTTP client; the loop registers ``on_stream_activity`` for
its task around a model stream, and every chunk of bytes that task reads, content or not, calls
it. The registry is keyed by task rather than held in a context variable because the loop's
stream is an async generator: its frames suspend and resume under the consumer's context.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar

C = TypeVar("C")

_watchers: weakref.WeakKeyDictionary[asyncio.Task[Any], Callable[[], None]] = weakref.WeakKeyDictionary()


class LoopBound(Generic[C]):
    """One client per running event loop.

    Args:
        make: builds a client; called once for each event loop that asks for one.
        given: a client the user built. It is used on every loop as it is (it is theirs to bind),
            so ``make`` is not called.
    """

    def __init__(self, make: Callable[[], C] | None = None, given: C | None = None) -> None:
        if make is None and given is None:
            raise ValueError("LoopBound needs a factory or a client")
        self._make = make
        # Each loop's client, with the generator that closes it when the loop shuts down.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[C, Any]] = weakref.WeakKeyDictionary()
        self._last: C | None = given
        # Keeps each client's closing generator out of this object's garbage (see the module's
        # docstring); released when this object is freed.
        self._closers: list[Any] = []
        weakref.finalize(self, _release_closers, self._closers).atexit = False

    def get(self) -> C:
        """The client of the running loop (or, outside any loop, the last one handed out)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self._make is None or loop is None:
            if self._last is None:
                assert self._make is not None
                self._last = self._make()
            return self._last
        entry = self._clients.get(loop)
        if entry is None:
            client = self._make()
            entry = self._clients[loop] = (client, _closed_at_shutdown(client))
            # A loop's shutdown finishes its generator (``ag_frame`` is then None): keep only the rest.
            self._closers[:] = [g for g in self._closers if g.ag_frame is not None] + [entry[1]]
        self._last = entry[0]
        return entry[0]


    def close(self) -> None:
        """Closes the clients this object made (a client it was given is its owner's), each on its loop.

        On the running loop the close is scheduled (a sync call cannot wait there; ``aclose``
        can); on a loop running in another thread it is handed to that loop; a loop that has shut
        down closed its client already, and one that is stopped closes it at its shutdown.
        """
        self._close(None)

    async def aclose(self) -> None:
        """``close``, waiting for the running loop's client to finish closing."""
        mine = self._close(asyncio.get_running_loop())
        if mine is not None:
            await mine.aclose()

    def _close(self, awaited: asyncio.AbstractEventLoop | None) -> Any:
        if self._make is None:
            return None
        self._last = None
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        mine = None
        for loop, (_, closer) in list(self._clients.items()):
            self._clients.pop(loop, None)
            if closer.ag_frame is None or loop.is_closed():
                continue  # closed at its loop's shutdown
            if loop is awaited:
                mine = closer
            elif loop is running:
                _closing_tasks.add(task := loop.create_task(closer.aclose()))
                task.add_done_callback(_closing_tasks.discard)
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(closer.aclose(), loop)
            # else: a loop that is neither running nor closed closes it at its shutdown
        self._closers[:] = [g for g in self._closers if g.ag_frame is not None and g is not mine]
        return mine


_closing_tasks: set[asyncio.Task[Any]] = set()  # the loop holds tasks weakly: these must finish


def _release_closers(closers: list[Any]) -> None:
    """Lets go of a dropped adapter's closing generators (their loops close them and the clients),
    warning as an unclosed file does if a client was still open."""
    still_open = sum(1 for g in closers if g.ag_frame is not None)
    closers.clear()
    if still_open:
        warnings.warn(
            f"unclosed model client ({still_open} pooled HTTP client{'s' if still_open != 1 else ''}); "
            "call agent.close() (or use 'with Agent(...)') to close its connections",
            ResourceWarning,
            stacklevel=2,
        )


def _closed_at_shutdown(client: Any) -> Any:
    """An async generator, started on the running loop, that closes ``client`` when closed itself.

    Starting it registers it with the loop (its first-iteration hook); the loop closes it at
    shutdown. The caller keeps it alive: the loop holds its generators weakly.
    """

    async def close_when_done() -> AsyncIterator[None]:
        try:
            yield
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):  # a client already closed, or half-built
                    await close()

    generator = close_when_done()
    first: Any = generator.__anext__()  # a coroutine-like awaitable: step it by hand
    with contextlib.suppress(StopIteration):
        first.send(None)  # runs to the ``yield`` at once: nothing is awaited first
    return generator


@contextlib.contextmanager
def on_stream_activity(callback: Callable[[], None]) -> Iterator[None]:
    """Calls ``callback`` whenever the current task reads bytes of a watched response."""
    task = asyncio.current_task()
    if task is None:
        yield
        return
    previous = _watchers.get(task)
    _watchers[task] = callback
    try:
        yield
    finally:
        if previous is None:
            _watchers.pop(task, None)
        else:
            _watchers[task] = previous


def watch_stream_activity(http_client: Any) -> None:
    """Makes the responses of ``http_client`` (an httpx-style async client) report activity.

    Idempotent; a client without ``event_hooks`` is left alone (its streams then count as
    active only when the adapter yields an event).
    """
    hooks = getattr(http_client, "event_hooks", None)
    if not isinstance(hooks, dict):
        return
    responses = list(hooks.get("response", []))
    if _watch in responses:
        return
    http_client.event_hooks = {**hooks, "response": [*responses, _watch]}


async def _watch(response: Any) -> None:
    response.stream = _Watched(response.stream)


def _byte_stream_bases() -> tuple[type, ...]:
    # Responses check ``isinstance(stream, AsyncByteStream)``: be one for each HTTP library the
    # SDKs may send through (httpx2 in current releases, httpx in older ones).
    bases: list[type] = []
    for module in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError):
            bases.append(__import__(module).AsyncByteStream)
    return tuple(bases) or (object,)


class _Watched(*_byte_stream_bases()):  # type: ignore[misc]
    """A response byte stream that reports each chunk to the context's activity callback."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            task = asyncio.current_task()
            beat = _watchers.get(task) if task is not None else None
            if beat is not None:
                beat()
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:  # the transport's own extras (e.g. ``close``)
        return getattr(self._inner, name)
