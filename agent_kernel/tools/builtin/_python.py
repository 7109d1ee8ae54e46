"""tools.builtin.python — the ``python`` tool: runs code where the user's data lives.

Inside IPython (a notebook) the code runs in the user's namespace, so the agent sees and
creates the same variables the notebook does. Elsewhere it runs in a private namespace kept in
``ToolContext.extras["namespace"]`` (which the caller may also supply). The result holds what
the code printed, its stderr, and the repr of a final expression, DataFrames shown compactly.

It is the user's own interpreter, not a sandbox: a snippet can do anything the notebook can
(read files and secrets, open sockets, start processes, reach and change the agent itself). Its
description and its approval request say so. What the loop does hold against it: the run's
permission settings and redactor are sealed when the run starts (``agent_kernel.guard._seal``), so
a snippet that changes them is caught, undone and journaled before the next call is judged.

Each snippet runs in a thread of its own (``tools.threads``), so the event loop (streaming, the
Stop button) stays live. Cancelling the run raises ``KeyboardInterrupt`` inside a running
snippet; one stuck in a C call is abandoned and named in the ``cancelled`` event. No lock is
held across a snippet, so a runaway never blocks the next ``python`` call. What it shows is
captured per thread (``tools.builtin.capture``): prints, ``display()`` output, rich results and
matplotlib figures. Figures and image outputs go back to the model as images (capped and
scaled, ``tools.builtin.images``); a model that takes no images reads a line naming each.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from agent_kernel.errors import ToolError
from agent_kernel.tools._threads import run_in_thread
from agent_kernel.tools._tool import Tool, ToolContext, ToolResult
from agent_kernel.tools.builtin._capture import Captured, run_captured
from agent_kernel.tools.builtin._images import MAX_IMAGES
from agent_kernel.tools.builtin._limits import MAX_OUTPUT_CHARS, truncate
from agent_kernel.tools.builtin._nbrender import output_images, output_text

PYTHON_WARNING = (
    "python runs code in your own Python process (the notebook's namespace): it can do anything "
    "the notebook can, including reading files and secrets, opening connections, starting programs "
    "and changing the agent itself; no rule or sandbox confines it"
)
"""Added to the reason of every approval request for the ``python`` tool (its description says it too)."""


def user_namespace(ctx: ToolContext | None) -> dict[str, Any]:
    """The namespace code runs in: ``extras["namespace"]``, else IPython's user namespace, else a
    new private one (stored in ``extras`` so later calls with the same extras share it)."""
    extras = ctx.extras if ctx is not None else {}
    namespace = extras.get("namespace")
    if namespace is not None:
        return namespace
    # Only an already-imported IPython can be running us; importing it here would cost ~0.2 s.
    ipython = sys.modules.get("IPython")
    if ipython is not None:
        shell = ipython.get_ipython()
        if shell is not None:
            return shell.user_ns
    namespace = {"__name__": "__agent__", "__builtins__": __builtins__}
    extras["namespace"] = namespace
    return namespace


def _format(captured: Captured) -> str:
    """The snippet's outputs as the model reads them: prints, then ``[stderr]``, shown values, the error."""
    stdout = "".join(o["text"] for o in captured.outputs if o["output_type"] == "stream" and o["name"] == "stdout")
    stderr = "".join(o["text"] for o in captured.outputs if o["output_type"] == "stream" and o["name"] == "stderr")
    parts = []
    if stdout:
        parts.append(stdout.rstrip("\n"))
    if stderr:
        parts.append("[stderr]\n" + stderr.rstrip("\n"))
    for output in captured.outputs:
        kind = output["output_type"]
        if kind == "display_data":
            parts.append(output_text(output))
        elif kind == "execute_result":
            value = output["data"].get("text/plain", "")
            parts.append(value if not parts else "[result]\n" + value)
    for output in captured.outputs:
        if output["output_type"] == "error":
            parts.append("\n".join(output["traceback"]).rstrip("\n"))
    return "\n".join(parts)


async def _python(code: str, ctx: ToolContext) -> str | ToolResult:
    """Runs Python code in the notebook's namespace (variables persist between calls) and returns
    what it printed plus the repr of its last expression, like a notebook cell; plots and other
    images it shows come back as images. The code runs in the user's own Python process: it can
    do anything the notebook can.

    Args:
        code: the Python source to run.
    """
    namespace = user_namespace(ctx)
    captured = await run_in_thread(functools.partial(run_captured, code, namespace), name="python", interrupt=True)
    text = truncate(_format(captured), MAX_OUTPUT_CHARS, keep="middle")
    if captured.failed:
        raise ToolError(text)
    images = [image for output in captured.outputs for image in output_images(output)]
    if len(images) > MAX_IMAGES:
        text += f"\n({len(images) - MAX_IMAGES} more images not sent: at most {MAX_IMAGES} per call.)"
    if images:
        return ToolResult(text or "(no output)", images=tuple(images[:MAX_IMAGES]))
    return text if text else "(no output)"


class PythonTool(Tool):
    """The ``python`` tool: a ``Tool`` whose approval requests carry ``PYTHON_WARNING``."""

    approval_warning = PYTHON_WARNING


python = PythonTool(_python, name="python", category="execute", concurrency_safe=False, permission_key=lambda a: str(a.get("code", "")))
