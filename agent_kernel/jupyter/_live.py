"""jupyter.live — the notebook tools change the notebook open in JupyterLab 4 or Notebook 7.

The package ships a prebuilt front-end extension (``agent-kernel-live``, in ``agent_kernel/_labextension``)
that registers the comm target ``agent_kernel.notebook`` on each notebook panel's kernel. When a
notebook tool first needs the open notebook, ``CommNotebooks`` opens a comm to that target and
waits for the panel's answer (the notebook's path). Requests then go over that comm, each answered
by the panel; they are handled while a ``%%agent`` cell awaits its run, as widget clicks are.

The same target carries ``%agent panel``'s request to open the session panel (``jupyter.panel``),
on a comm of its own that nothing waits on.

No answer (VS Code, Colab, a kernel without the extension, a closed tab) means no live document,
and the tools use the saved file. A change request that the panel does not confirm in time is an
error, never a silent fallback: the edit may or may not have happened, so the model is told to read
the notebook again.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

from agent_kernel.errors import ToolError
from agent_kernel.tools.builtin._nblive import LiveUnavailable, live_notebooks, use_live_notebooks

#: The comm target the front-end extension registers.
TARGET = "agent_kernel.notebook"
#: Seconds to wait for a front end to answer the first request; none answering means file mode.
HELLO_TIMEOUT = 2.0
#: Seconds a front end that answered before has to answer again before a new comm is opened.
PING_TIMEOUT = 1.0
#: Seconds a front end has to carry out one request.
REQUEST_TIMEOUT = 15.0
#: Seconds after a front end did not answer before one is looked for again (a page reloaded with
#: the extension installed is found then).
RETRY_AFTER = 30.0


class CommNotebooks:
    """The front end of this kernel's notebook, reached over one comm (``LiveNotebooks``)."""

    def __init__(self) -> None:
        self._comm: Any = None
        self.path = ""
        self._waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]] = {}
        self._ids = itertools.count(1)
        self._absent_until = 0.0
        self._connecting: asyncio.Future[None] | None = None

    async def open(self, notebook: Path) -> CommNotebooks | None:
        """This front end when it shows ``notebook``; None when no front end answers or it shows another."""
        if self._comm is not None and not await self._answers():
            self._forget(close=True)  # a page reloaded or closed: its comm is gone, a new page may be there
        if self._comm is None:
            if time.monotonic() < self._absent_until:
                return None
            await self._connect()
            if self._comm is None:
                return None
        shown = Path(self.path)
        if not self.path or notebook.parts[-len(shown.parts):] != shown.parts:
            return None
        return self

    async def _answers(self) -> bool:
        """True when the front end behind the open comm still answers (one round trip)."""
        request_id = self._next_id()
        future = self._expect(request_id)
        self._comm.send({"id": request_id, "op": "hello"})
        try:
            answer = await asyncio.wait_for(future, PING_TIMEOUT)
        except (asyncio.TimeoutError, LiveUnavailable):
            self._waiting.pop(request_id, None)
            return False
        self.path = str(answer.get("path") or self.path)  # a notebook renamed in the front end
        return True

    async def _connect(self) -> None:
        if self._connecting is not None:  # another call is already asking
            await asyncio.shield(self._connecting)
            return
        self._connecting = asyncio.get_running_loop().create_future()
        try:
            from comm import create_comm

            request_id = self._next_id()
            future = self._expect(request_id)
            comm = create_comm(target_name=TARGET, data={"id": request_id, "op": "hello"})
            comm.on_msg(self._on_msg)
            comm.on_close(self._on_close)
            self._comm = comm
            try:
                answer = await asyncio.wait_for(future, HELLO_TIMEOUT)
            except (asyncio.TimeoutError, LiveUnavailable):
                self._forget(close=True)
                self._absent_until = time.monotonic() + RETRY_AFTER
                return
            self.path = str(answer.get("path") or "")
        finally:
            self._connecting.set_result(None)
            self._connecting = None

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Sends ``op`` to the open notebook and returns the answer (see ``LiveNotebook.request``)."""
        comm = self._comm
        if comm is None:
            raise LiveUnavailable("The open notebook is no longer reachable.")
        request_id = self._next_id()
        future = self._expect(request_id)
        comm.send({"id": request_id, "op": op, **fields})
        try:
            answer = await asyncio.wait_for(future, REQUEST_TIMEOUT)
        except asyncio.TimeoutError:
            self._forget(close=True)
            if op == "read":
                raise LiveUnavailable("The open notebook did not answer.") from None
            raise ToolError(f"The notebook open in Jupyter ({self.path}) did not confirm the {op} within {REQUEST_TIMEOUT:.0f} s, "
                            "so it may or may not show it: read the notebook again before changing it.") from None
        if not answer.get("ok"):
            raise ToolError(f"The notebook open in Jupyter ({self.path}) refused the {op}: {answer.get('error')}")
        return answer

    def close(self) -> None:
        """Closes the comm (the front end stops serving it); the next call looks for a front end again."""
        self._forget(close=True)

    def _next_id(self) -> str:
        return f"r{next(self._ids)}"

    def _expect(self, request_id: str) -> asyncio.Future[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._waiting[request_id] = (loop, future)
        return future

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        waiting = self._waiting.pop(str(data.get("id")), None)
        if waiting is None:  # a second tab answering the same request, or one given up on
            return
        loop, future = waiting
        loop.call_soon_threadsafe(_settle, future, data, None)

    def _on_close(self, msg: dict[str, Any]) -> None:
        self._forget(close=False)

    def _forget(self, *, close: bool) -> None:
        comm, self._comm, self.path = self._comm, None, ""
        waiting, self._waiting = self._waiting, {}
        for loop, future in waiting.values():
            loop.call_soon_threadsafe(_settle, future, None, LiveUnavailable("The open notebook closed its connection."))
        if close and comm is not None:
            try:
                comm.close()
            except Exception:  # the kernel may be shutting down; nothing to tell
                pass


def _settle(future: asyncio.Future[dict[str, Any]], data: dict[str, Any] | None, error: Exception | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(data or {})


def install(kernel: Any) -> None:
    """Lets the notebook tools reach this kernel's open notebook (inside an ipykernel only)."""
    if kernel is None or getattr(kernel, "comm_manager", None) is None:
        return
    if not isinstance(live_notebooks(), CommNotebooks):  # loading twice keeps the comm it has
        use_live_notebooks(CommNotebooks())


def uninstall() -> None:
    """The notebook tools go back to files only (``%unload_ext agent_kernel``)."""
    provider = live_notebooks()
    if isinstance(provider, CommNotebooks):
        provider.close()
    use_live_notebooks(None)
