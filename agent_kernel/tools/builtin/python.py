"""tools.builtin.python — the ``python`` tool: runs code where the user's data lives.

Inside IPython (a notebook) the code runs in the user's namespace, so the agent sees and
creates the same variables the notebook does. Elsewhere it runs in a private namespace kept in
``ToolContext.extras["namespace"]`` (which the caller may also supply). The result holds what
the code printed, its stderr, and the repr of a final expression, DataFrames shown compactly.

The code runs in a worker thread, so the event loop (streaming, the Stop button) stays live.
Output is captured per thread: prints from other threads still reach their own destination.
"""

from __future__ import annotations

import ast
import io
import linecache
import sys
import threading
import traceback
from typing import Any, TextIO

from ...errors import ToolError
from ..tool import Tool, ToolContext
from .limits import MAX_OUTPUT_CHARS, truncate

__all__ = ["python", "user_namespace"]

_FILENAME = "<agent>"
# Python runs one snippet at a time: the captured streams are process-wide objects.
_run_lock = threading.Lock()


def user_namespace(ctx: ToolContext | None) -> dict[str, Any]:
    """The namespace code runs in: ``extras["namespace"]``, else IPython's user namespace, else a
    new private one (stored in ``extras`` so later calls with the same extras share it)."""
    extras = ctx.extras if ctx is not None else {}
    namespace = extras.get("namespace")
    if namespace is not None:
        return namespace
    # Only an already-imported IPython can be running us; importing it here would cost ~0.2 s.
    if "IPython" in sys.modules:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            return shell.user_ns
    namespace = {"__name__": "__agent__", "__builtins__": __builtins__}
    extras["namespace"] = namespace
    return namespace


class _ThreadStream(io.TextIOBase):
    """Sends writes from one thread to a buffer and all others to the original stream."""

    def __init__(self, original: TextIO, thread: int) -> None:
        self.original = original
        self.thread = thread
        self.buffer_ = io.StringIO()

    def write(self, text: str) -> int:
        if threading.get_ident() == self.thread:
            return self.buffer_.write(text)
        return self.original.write(text)

    def flush(self) -> None:
        if threading.get_ident() != self.thread:
            self.original.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


def compact_repr(value: Any) -> str:
    """``repr(value)``, with pandas objects limited to 20 rows and 20 columns and their shape."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(value, (pandas.DataFrame, pandas.Series)):
        with pandas.option_context("display.max_rows", 20, "display.min_rows", 10, "display.max_columns", 20, "display.width", 120):
            text = repr(value)
        shape = " × ".join(str(n) for n in value.shape)
        return f"{text}\n[{type(value).__name__} {shape}]"
    return repr(value)


def _split_last_expression(code: str) -> tuple[ast.Module, ast.Expression | None]:
    tree = ast.parse(code, _FILENAME, "exec")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
        return tree, last
    return tree, None


def _run(code: str, namespace: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    """Runs ``code``; returns (stdout, stderr, repr of the last expression, formatted traceback)."""
    try:
        body, last = _split_last_expression(code)
    except SyntaxError as exc:
        return "", "", None, "".join(traceback.format_exception_only(type(exc), exc))
    with _run_lock:
        # Registered so tracebacks quote the model's own lines.
        linecache.cache[_FILENAME] = (len(code), None, code.splitlines(keepends=True), _FILENAME)
        me = threading.get_ident()
        out, err = _ThreadStream(sys.stdout, me), _ThreadStream(sys.stderr, me)
        sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
        value: str | None = None
        failure: str | None = None
        try:
            exec(compile(body, _FILENAME, "exec"), namespace)
            if last is not None:
                result = eval(compile(last, _FILENAME, "eval"), namespace)
                if result is not None:
                    value = compact_repr(result)
                    namespace["_"] = result
        except BaseException as exc:  # the code's own exceptions (SystemExit and KeyboardInterrupt too)
            frames = traceback.extract_tb(exc.__traceback__)
            # Drop our own frames: the model should see only its code.
            ours = [f for f in frames if f.filename == _FILENAME] or frames
            failure = "Traceback (most recent call last):\n" + "".join(traceback.format_list(ours))
            failure += "".join(traceback.format_exception_only(type(exc), exc))
        finally:
            sys.stdout, sys.stderr = out.original, err.original
        return out.buffer_.getvalue(), err.buffer_.getvalue(), value, failure


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
    what it printed plus the repr of its last expression, like a notebook cell.

    Args:
        code: the Python source to run.
    """
    import asyncio

    namespace = user_namespace(ctx)
    stdout, stderr, value, failure = await asyncio.to_thread(_run, code, namespace)
    text = truncate(_format(stdout, stderr, value, failure), MAX_OUTPUT_CHARS, keep="middle")
    if failure:
        raise ToolError(text)
    return text if text else "(no output)"


python = Tool(_python, name="python", category="execute", concurrency_safe=False, permission_key=lambda a: str(a.get("code", "")))
