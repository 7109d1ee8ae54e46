"""jupyter.fix — ``%agent fix``: the last failing cell, put to the agent as a question.

IPython keeps the last exception a cell raised (``sys.last_exc``, or ``sys.last_value`` before
Python 3.12); its traceback leads to the cell's code, which IPython keeps in ``linecache``. The
prompt holds the cell's source, the traceback (colour codes removed) and the names the cell
uses with what they hold now (a type and a short repr; a name that is not defined says so),
all inside a ``<notebook-data>`` block marked as data: text in a cell or an error message is
something to fix, never an instruction.
"""

from __future__ import annotations

import ast
import builtins
import linecache
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any

from agent_kernel.errors import UserError
from agent_kernel.tools.builtin._nbrender import DATA_NOTE, DATA_TAG, inert

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: Characters of traceback and of each name's repr put in the prompt at most.
TRACEBACK_CHARS = 4_000
REPR_CHARS = 200


@dataclass(frozen=True)
class Failure:
    """The last cell that raised: its source, its traceback, and the names it uses."""

    source: str
    traceback: str
    error: str  # "ename: evalue"
    names: dict[str, str]  # name -> "type: short repr" (or "not defined")


def _cell_source(tb: Any) -> str:
    """The source of the outermost frame that IPython compiled from a cell."""
    for frame, _ in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if filename.startswith("<ipython-input-") or "ipykernel_" in filename or filename.startswith("<cell"):
            lines = linecache.getlines(filename)
            if lines:
                return "".join(lines)
    return ""


def names_used(source: str, namespace: dict[str, Any]) -> dict[str, str]:
    """The names ``source`` reads, each with what ``namespace`` holds for it now: a type and a
    short repr, or "not defined" (built-ins left out)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    used: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in used:
            used.append(node.id)
    described: dict[str, str] = {}
    for name in used[:30]:
        if name in namespace:
            value = namespace[name]
            try:
                text = repr(value)
            except Exception as exc:  # a repr that fails is itself worth knowing
                text = f"<repr failed: {exc}>"
            text = " ".join(text.split())
            if len(text) > REPR_CHARS:
                text = text[:REPR_CHARS] + "…"
            shape = getattr(value, "shape", None)
            kind = type(value).__name__ + (f" {shape}" if isinstance(shape, tuple) else "")
            described[name] = f"{kind}: {text}"
        elif not hasattr(builtins, name):
            described[name] = "not defined"
    return described


def failure_of(exc: BaseException, namespace: dict[str, Any] | None, source: str | None = None) -> Failure:
    """The ``Failure`` that ``exc`` makes of the cell that raised it.

    Args:
        exc: the exception the cell raised.
        namespace: where to look up the names the cell uses; None leaves them out (to be
            described later, as they are then: ``names_used``).
        source: the cell's source; None finds it from the traceback.
    """
    tb = exc.__traceback__
    text = _ANSI.sub("", "".join(traceback.format_exception(type(exc), exc, tb)))
    if len(text) > TRACEBACK_CHARS:
        text = "[… start of the traceback cut]\n" + text[-TRACEBACK_CHARS:]
    if source is None:
        source = _cell_source(tb)
    names = names_used(source, namespace) if namespace is not None else {}
    return Failure(source, text, f"{type(exc).__name__}: {exc}", names)


def last_failure(namespace: dict[str, Any]) -> Failure | None:
    """The last exception a cell raised in this process, or None when none has."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if exc is None:
        return None
    return failure_of(exc, namespace)


def prompt_about(failure: Failure, request: str = "", *, which: str = "The last notebook cell") -> str:
    """The question put to the agent about ``failure``: the cell, its error and the names it uses,
    as data; ``which`` names the cell in the first sentence."""
    names = "\n".join(f"- {name}: {about}" for name, about in failure.names.items()) or "(none)"
    ask = request.strip() or "Explain what went wrong and how to fix it; then fix the cell if you can."
    return (
        f"{which} failed with {inert(failure.error.splitlines()[0] if failure.error else 'an error')}. {ask}\n\n"
        f"{DATA_NOTE}\n<{DATA_TAG}>\n"
        f"The cell's source:\n{inert(failure.source) or '(not available)'}\n\n"
        f"The traceback:\n{inert(failure.traceback)}\n"
        f"The names it uses, as they are now:\n{inert(names)}\n</{DATA_TAG}>"
    )


def fix_prompt(namespace: dict[str, Any], request: str = "") -> str:
    """The prompt ``%agent fix`` sends: the last failing cell, its error and the names it uses.

    Raises:
        UserError: no cell has failed in this kernel yet.
    """
    failure = last_failure(namespace)
    if failure is None:
        raise UserError("No cell has failed in this kernel yet; %agent fix asks about the last cell that raised an error.")
    return prompt_about(failure, request)
