"""tools.builtin.nbrun — running one notebook cell for ``run_cell``, where its notebook lives.

Two places a cell can run:

- In this process, in the user's namespace, when the notebook is the kernel's own (the agent
  runs inside it): the kernel is busy with the agent's cell, so nothing is queued on it; the code
  runs in a thread of its own with its output captured (``tools.builtin.capture``), as the
  ``python`` tool runs. Cancelling the run or passing the timeout raises ``KeyboardInterrupt`` in
  the cell's code.
- In a kernel started for the file (nbclient), for any other notebook: the kernel stays up for
  later cells of the same notebook in the same session (variables persist, as in Jupyter), and
  is interrupted on cancel or timeout. ``shutdown_kernels`` (and interpreter exit) stops them.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_kernel.tools._threads import run_in_thread
from agent_kernel.tools.builtin._capture import Captured, run_captured

#: Where a session keeps the kernels started for notebook files (canonical path -> client).
KERNELS_KEY = "notebook_kernels"

_all_clients: list[Any] = []  # every kernel started, so interpreter exit can stop the ones left

# Run first in each kernel started for a file: the notebook's folder goes last on sys.path, so a
# cell imports the notebook's own modules (``helper.py`` beside it) but never a file there named
# like an installed or standard module in its place (a ``json.py`` or ``pandas.py`` written by a
# command). A kernel that is not Python ignores it.
PATH_SETUP = "import os as _ak_os, sys as _ak_sys\n_ak_sys.path.append(_ak_os.getcwd())\ndel _ak_os, _ak_sys\n"

# Run once in each kernel started for a file: after each cell, the figures it left open are shown
# as PNG with their title and axes in the output's metadata (what an image's alt line says), then
# closed, before the inline backend would show them without. Plain Python: the kernel need not
# have agent_kernel installed.
FIGURE_SETUP = """
def _agent_kernel_figures():
    import sys
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    import base64, io
    from IPython.display import display
    for number in plt.get_fignums():
        figure = plt.figure(number)
        axes = [{"title": a.get_title(), "xlabel": a.get_xlabel(), "ylabel": a.get_ylabel()} for a in figure.get_axes()]
        suptitle = getattr(figure, "_suptitle", None)
        title = suptitle.get_text() if suptitle is not None else (axes[0]["title"] if axes else "")
        buffer = io.BytesIO()
        try:
            figure.savefig(buffer, format="png", dpi=72, bbox_inches="tight")
        finally:
            plt.close(figure)
        display({"image/png": base64.b64encode(buffer.getvalue()).decode("ascii"), "text/plain": "<Figure %r>" % title},
                raw=True, metadata={"agent_kernel_figure": {"title": title, "axes": axes}})
get_ipython().events.register("post_execute", _agent_kernel_figures)
del _agent_kernel_figures
"""


@dataclass
class CellRun:
    """One cell's run: its nbformat outputs, how it ended, and where it ran."""

    outputs: list[dict[str, Any]]
    status: str  # ok, error, timeout or cancelled
    mode: str  # in_process or kernel
    duration_s: float
    execution_count: int | None = None


def _timeout_error(timeout: float) -> dict[str, Any]:
    message = f"the cell ran for more than {timeout:g} s and was interrupted"
    return {"output_type": "error", "ename": "TimeoutError", "evalue": message, "traceback": [f"TimeoutError: {message}"]}


async def run_in_process(source: str, namespace: dict[str, Any], index: int, timeout: float,
                         on_change: Callable[[Captured], None] | None = None) -> CellRun:
    """Runs ``source`` in ``namespace`` in a thread of its own, capturing what it shows
    (``on_change`` hears, in that thread, each time the outputs grow)."""
    started = time.monotonic()
    work = functools.partial(run_captured, source, namespace, shown=f"<cell {index}>", on_change=on_change)
    try:
        captured = await asyncio.wait_for(run_in_thread(work, name="run_cell", interrupt=True), timeout)
    except asyncio.TimeoutError:
        return CellRun([_timeout_error(timeout)], "timeout", "in_process", time.monotonic() - started)
    status = "error" if captured.failed else "ok"
    return CellRun(captured.outputs, status, "in_process", time.monotonic() - started)


async def _client(extras: dict[str, Any], key: str, nb: Any, folder: str) -> Any:
    from nbclient import NotebookClient

    kernels = extras.setdefault(KERNELS_KEY, {})
    client = kernels.get(key)
    if client is not None and client.km is not None and await _alive(client):
        client.nb = nb
        return client
    kernel_name = (nb.metadata.get("kernelspec") or {}).get("name") or "python3"
    client = NotebookClient(nb, kernel_name=kernel_name, allow_errors=True, interrupt_on_timeout=True,
                            resources={"metadata": {"path": folder}})
    client.km = client.create_kernel_manager()
    # The kernel's own stderr (transport warnings, its shutdown notice) is not the cell's output:
    # inherited, it would show up in whatever cell the agent runs in.
    # PYTHONSAFEPATH: the kernel's Python does not look in its folder first, for the modules it
    # starts with (``python -m ipykernel_launcher`` would run an ``ipykernel_launcher.py`` written
    # there) or for a cell's imports; PATH_SETUP then puts the folder last, for the notebook's own.
    await client.async_start_new_kernel(cwd=folder, env={**os.environ, "PYTHONSAFEPATH": "1"},
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await client.async_start_new_kernel_client()
    try:
        kc: Any = client.kc  # an AsyncKernelClient once started
        await kc.execute_interactive(PATH_SETUP, silent=True, store_history=False, timeout=30)
        await kc.execute_interactive(FIGURE_SETUP, silent=True, store_history=False, timeout=30)
    except Exception:  # not an IPython kernel: figures are shown as the kernel shows them
        pass
    kernels[key] = client
    _all_clients.append(client)
    return client


async def _alive(client: Any) -> bool:
    try:
        return bool(await client.km.is_alive())
    except Exception:
        return False


async def run_in_kernel(extras: dict[str, Any], key: str, nb: Any, index: int, folder: str, timeout: float) -> CellRun:
    """Runs cell ``index`` of ``nb`` in the kernel kept for ``key`` (started in ``folder`` if needed).

    The cell's outputs and execution count are set on ``nb`` itself.
    """
    from nbclient.exceptions import CellTimeoutError

    started = time.monotonic()
    client = await _client(extras, key, nb, folder)
    client.timeout = timeout
    cell = nb.cells[index]
    try:
        await client.async_execute_cell(cell, index, store_history=True)
    except CellTimeoutError:
        cell.outputs.append(_timeout_error(timeout))
        return CellRun(list(cell.outputs), "timeout", "kernel", time.monotonic() - started, cell.get("execution_count"))
    except asyncio.CancelledError:
        try:
            await client.km.interrupt_kernel()
        finally:
            raise
    failed = any(o.get("output_type") == "error" for o in cell.outputs)
    return CellRun(list(cell.outputs), "error" if failed else "ok", "kernel", time.monotonic() - started, cell.get("execution_count"))


async def _stop(client: Any) -> None:
    try:
        if client.kc is not None:
            client.kc.stop_channels()
        await client.km.shutdown_kernel(now=True)
    except Exception:  # already gone
        pass


async def shutdown_kernels(extras: dict[str, Any]) -> None:
    """Stops the kernels started for notebook files in this session (``extras``)."""
    kernels = extras.pop(KERNELS_KEY, {}) or {}
    for client in kernels.values():
        await _stop(client)
        if client in _all_clients:
            _all_clients.remove(client)


@atexit.register
def _stop_all() -> None:
    if not _all_clients:
        return
    clients = list(_all_clients)
    _all_clients.clear()

    async def stop() -> None:
        for client in clients:
            await _stop(client)

    try:
        asyncio.run(stop())
    except Exception:
        for client in clients:  # last resort: the kernel processes must not outlive us
            try:
                client.km.provisioner.process.kill()
            except Exception:
                pass


def folder_of(path: str) -> str:
    """The folder a notebook's kernel starts in (the notebook's own, as Jupyter does)."""
    return os.path.dirname(os.path.abspath(path))
