"""blocking — runs a coroutine to completion from synchronous code, inside a running loop or not.

``Agent.run_sync`` and ``Crew.run_sync`` both need this. Outside any event loop it is
``asyncio.run``. Inside one (a notebook cell, an async application) a nested ``asyncio.run``
would fail and blocking the running loop would deadlock anything the coroutine waits for, so the
coroutine runs on a private loop in a worker thread while the caller waits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: True inside a coroutine ``run_blocking`` runs: its loop closes when the call returns, so
#: nothing meant to outlive the call (an MCP server's connection) may live on it.
SHORT_LIVED_LOOP: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_kernel_short_lived_loop", default=False)


async def _marked(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    SHORT_LIVED_LOOP.set(True)
    return await make()


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]], *, thread_name: str = "agent_kernel-run") -> T:
    """Runs the coroutine ``make()`` builds and returns its result.

    Args:
        make: builds the coroutine; called in the thread whose loop runs it.
        thread_name: names the worker thread, when one is needed.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_marked(make))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=thread_name) as pool:
        return pool.submit(lambda: asyncio.run(_marked(make))).result()
