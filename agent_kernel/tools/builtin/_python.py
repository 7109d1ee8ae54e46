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
held across a snippet, so a runaway never blocks the next ``python`` call. Output is captured
per thread through one router installed on ``sys.stdout``/``sys.stderr`` while any snippet
runs: prints from other threads still reach their own destination.
"""

from __future__ import annotations

import ast
import functools
import io
import itertools
import linecache
import sys
import threading
import traceback
from typing import Any, TextIO

from agent_kernel.errors import ToolError
from agent_kernel.tools._threads import run_in_thread
from agent_kernel.tools._tool import Tool, ToolContext
from agent_kernel.tools.builtin._limits import MAX_OUTPUT_CHARS, truncate

__all__ = ["PYTHON_WARNING", "PythonTool", "python", "user_namespace"]

_FILENAME = "<agent>"
_numbers = itertools.count(1)

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


class _Router(io.TextIOBase):
    """Sends writes from the threads running snippets to their buffers, all others to ``original``."""

    def __init__(self, original: TextIO) -> None:
        self.original = original
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        buffer = self.buffers.get(threading.get_ident())
        if buffer is not None:
            return buffer.write(text)
        return self.original.write(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.buffers:
            self.original.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


# Guards installing and removing the routers only (never held while a snippet runs).
_routing = threading.Lock()
_routers: dict[str, _Router] = {}


def _capture() -> tuple[io.StringIO, io.StringIO]:
    """Routes this thread's stdout and stderr to new buffers, installing the routers if needed."""
    me = threading.get_ident()
    buffers = []
    with _routing:
        for name in ("stdout", "stderr"):
            router = _routers.get(name)
            if router is None or getattr(sys, name) is not router:
                router = _routers[name] = _Router(getattr(sys, name))
                setattr(sys, name, router)
            buffer = router.buffers[me] = io.StringIO()
            buffers.append(buffer)
    return buffers[0], buffers[1]


def _release() -> None:
    """Stops routing this thread; the last snippet to finish puts the original streams back."""
    me = threading.get_ident()
    with _routing:
        for name in ("stdout", "stderr"):
            router = _routers.get(name)
            if router is None:
                continue
            router.buffers.pop(me, None)
            if not router.buffers:
                if getattr(sys, name) is router:  # someone else may have replaced it since
                    setattr(sys, name, router.original)
                del _routers[name]


def compact_repr(value: Any) -> str:
    """``repr(value)``, with pandas objects limited to 20 rows and 20 columns and their shape."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(value, (pandas.DataFrame, pandas.Series)):
        with pandas.option_context("display.max_rows", 20, "display.min_rows", 10, "display.max_columns", 20, "display.width", 120):
            text = repr(value)
        shape = " × ".join(str(n) for n in value.shape)
        return f"{text}\n[{type(value).__name__} {shape}]"
    return repr(value)


def _split_last_expression(code: str, filename: str = _FILENAME) -> tuple[ast.Module, ast.Expression | None]:
    tree = ast.parse(code, filename, "exec")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
        return tree, last
    return tree, None


def _run(code: str, namespace: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    """Runs ``code``; returns (stdout, stderr, repr of the last expression, formatted traceback)."""
    # Each snippet its own file name: tracebacks quote its lines even while another one runs.
    filename = f"<agent-{next(_numbers)}>"
    try:
        body, last = _split_last_expression(code, filename)
    except SyntaxError as exc:
        return "", "", None, "".join(traceback.format_exception_only(type(exc), exc)).replace(filename, _FILENAME)
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    out, err = _capture()
    value: str | None = None
    failure: str | None = None
    try:
        exec(compile(body, filename, "exec"), namespace)
        if last is not None:
            result = eval(compile(last, filename, "eval"), namespace)
            if result is not None:
                value = compact_repr(result)
                namespace["_"] = result
    except BaseException as exc:  # the code's own exceptions (SystemExit and KeyboardInterrupt too)
        frames = traceback.extract_tb(exc.__traceback__)
        # Drop our own frames: the model should see only its code.
        ours = [f for f in frames if f.filename == filename] or frames
        failure = "Traceback (most recent call last):\n" + "".join(traceback.format_list(ours))
        failure += "".join(traceback.format_exception_only(type(exc), exc))
        failure = failure.replace(filename, _FILENAME)
    finally:
        _release()
        linecache.cache.pop(filename, None)
    return out.getvalue(), err.getvalue(), value, failure


def _format(stdout: str, stderr: str, value: str | None, failure: str | None) -> str:
    parts = []
    if stdout:
        parts.append(stdout.rstrip("\n"))
    if stderr:
        parts.append("[stderr]\n" + stderr.rstrip("\n"))
    if value is not None:
        parts.append(value if not parts else "[result]\n" + value)
    if failure:
        parts.append(failure.rstrip("\n"))
    return "\n".join(parts)


async def _python(code: str, ctx: ToolContext) -> str:
    """Runs Python code in the notebook's namespace (variables persist between calls) and returns
    what it printed plus the repr of its last expression, like a notebook cell. The code runs in
    the user's own Python process: it can do anything the notebook can.

    Args:
        code: the Python source to run.
    """
    namespace = user_namespace(ctx)
    stdout, stderr, value, failure = await run_in_thread(functools.partial(_run, code, namespace), name="python", interrupt=True)
    text = truncate(_format(stdout, stderr, value, failure), MAX_OUTPUT_CHARS, keep="middle")
    if failure:
        raise ToolError(text)
    return text if text else "(no output)"


class PythonTool(Tool):
    """The ``python`` tool: a ``Tool`` whose approval requests carry ``PYTHON_WARNING``."""

    approval_warning = PYTHON_WARNING


python = PythonTool(_python, name="python", category="execute", concurrency_safe=False, permission_key=lambda a: str(a.get("code", "")))
