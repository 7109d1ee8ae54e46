"""tools.builtin.capture — running code in this process and keeping everything it shows.

The ``python`` tool and ``run_cell`` run code in a thread of their own and need what a notebook
would show for it: stdout and stderr, ``display()`` output, the last expression's value (rich
forms included: a DataFrame's HTML), matplotlib figures, and the error with its traceback. They
are kept as nbformat outputs, so ``run_cell`` writes them into the notebook as they are and the
model reads them through the same renderer as ``read_notebook``.

Capture is per thread: stdout/stderr go through a router installed on ``sys.stdout``/``sys.stderr``
while any capture runs, and in IPython the shell's display publisher is routed the same way, so
the live view of the running agent (published from the loop's thread) still reaches the
notebook. Figures the code leaves open are saved as PNG (with their title and axes in the
output's metadata, and in the PNG's own text chunks) and closed, as the inline backend would.
"""

from __future__ import annotations

import ast
import base64
import io
import itertools
import linecache
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

_FILENAME = "<agent>"
_numbers = itertools.count(1)


class _Router(io.TextIOBase):
    """Sends writes from the threads running snippets to their buffers, all others to ``original``."""

    def __init__(self, original: TextIO) -> None:
        self.original = original
        self.buffers: dict[int, Captured] = {}
        self.name = ""

    def write(self, text: str) -> int:
        captured = self.buffers.get(threading.get_ident())
        if captured is not None:
            captured.stream(self.name, text)
            return len(text)
        return self.original.write(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.buffers:
            self.original.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class _DisplayRouter:
    """Stands in for an IPython display publisher's ``publish``: capturing threads keep their own."""

    def __init__(self, publisher: Any) -> None:
        self.publisher = publisher
        self.original = publisher.publish
        self.buffers: dict[int, Captured] = {}

    def __call__(self, data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
        captured = self.buffers.get(threading.get_ident())
        if captured is None:
            return self.original(data, metadata, *args, **kwargs)
        if kwargs.get("update") or kwargs.get("transient"):
            return None  # a display update is for a live front end; the cell's outputs keep the first
        captured.outputs.append({"output_type": "display_data", "data": dict(data or {}), "metadata": dict(metadata or {})})
        captured.changed()
        return None


# Guards installing and removing the routers only (never held while a snippet runs).
_routing = threading.Lock()
_routers: dict[str, _Router] = {}
_display: list[_DisplayRouter] = []


def _shell() -> Any:
    ipython = sys.modules.get("IPython")  # only an already-imported IPython can be running us
    return ipython.get_ipython() if ipython is not None else None


def _start(captured: Captured) -> None:
    me = threading.get_ident()
    with _routing:
        for name in ("stdout", "stderr"):
            router = _routers.get(name)
            if router is None or getattr(sys, name) is not router:
                router = _routers[name] = _Router(getattr(sys, name))
                router.name = name
                setattr(sys, name, router)
            router.buffers[me] = captured
        shell = _shell()
        publisher = getattr(shell, "display_pub", None)
        if publisher is not None:
            if not _display or _display[0].publisher is not publisher:
                _display[:] = [_DisplayRouter(publisher)]
                publisher.publish = _display[0]
            _display[0].buffers[me] = captured


def _stop() -> None:
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
        if _display:
            display = _display[0]
            display.buffers.pop(me, None)
            if not display.buffers:
                if display.publisher.__dict__.get("publish") is display:
                    del display.publisher.publish
                _display.clear()


@dataclass
class Captured:
    """What a snippet showed, as nbformat outputs (``stream``, ``display_data``, ``execute_result``, ``error``)."""

    outputs: list[dict[str, Any]] = field(default_factory=list)
    value: Any = None
    failed: bool = False
    #: Called (in the running thread) each time the outputs grow: ``run_cell`` shows them as they come.
    on_change: Callable[[Captured], None] | None = field(default=None, repr=False, compare=False)

    def stream(self, name: str, text: str) -> None:
        """Adds text to the last output when it is the same stream, else a new stream output."""
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last.get("output_type") == "stream" and last.get("name") == name:
            last["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": name, "text": text})
        self.changed()

    def changed(self) -> None:
        """Tells ``on_change`` the outputs grew (a failing listener never breaks the code's run)."""
        if self.on_change is not None:
            try:
                self.on_change(self)
            except Exception:
                self.on_change = None


def compact_repr(value: Any) -> str:
    """``repr(value)``, with pandas objects limited to 20 rows and 20 columns and their shape."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(value, (pandas.DataFrame, pandas.Series)):
        with pandas.option_context("display.max_rows", 20, "display.min_rows", 10, "display.max_columns", 20, "display.width", 120):
            text = repr(value)
        shape = " × ".join(str(n) for n in value.shape)
        return f"{text}\n[{type(value).__name__} {shape}]"
    return repr(value)


def _bundle(value: Any) -> dict[str, Any]:
    """The MIME bundle a notebook would show for ``value`` (its plain text compact)."""
    data: dict[str, Any] = {}
    shell = _shell()
    formatter = getattr(shell, "display_formatter", None)
    if formatter is not None:
        try:
            data, _ = formatter.format(value)
            data = dict(data)
        except Exception:
            data = {}
    else:
        for method, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"), ("_repr_png_", "image/png")):
            render = getattr(value, method, None)
            if callable(render) and not isinstance(value, type):
                try:
                    out = render()
                except Exception:
                    continue
                if out is not None:
                    data[mime] = base64.b64encode(out).decode("ascii") if isinstance(out, bytes) else out
    data["text/plain"] = compact_repr(value)
    return data


def _open_figures() -> set[int]:
    pyplot = sys.modules.get("matplotlib.pyplot")
    return set(pyplot.get_fignums()) if pyplot is not None else set()


def _save_figures(captured: Captured, before: set[int]) -> None:
    """Saves each figure the code opened as a PNG output (title and axes in its metadata), then closes it."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    from agent_kernel.tools.builtin._images import describe_figure, figure_alt, png_size

    for number in sorted(set(pyplot.get_fignums()) - before):
        figure = pyplot.figure(number)
        info = describe_figure(figure)
        buffer = io.BytesIO()
        try:
            figure.savefig(buffer, format="png", dpi=72, bbox_inches="tight",
                           metadata={"Title": info["title"] or "", "Description": figure_alt(info), "Software": None})
        except Exception as exc:  # a figure that cannot draw: said, not fatal
            captured.stream("stderr", f"(figure {number} could not be drawn: {exc})\n")
            continue
        finally:
            pyplot.close(figure)
        png = buffer.getvalue()
        size = png_size(png) or (None, None)
        captured.outputs.append({
            "output_type": "display_data",
            "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": f"<Figure {figure_alt(info)}>"},
            "metadata": {"image/png": {"width": size[0], "height": size[1]}, "agent_kernel_figure": info},
        })


def _split_last_expression(code: str, filename: str) -> tuple[ast.Module, ast.Expression | None]:
    tree = ast.parse(code, filename, "exec")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
        return tree, last
    return tree, None


def _error(exc: BaseException, filename: str, shown: str) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if f.filename == filename] or frames  # the model should see only its code
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(ours), *traceback.format_exception_only(type(exc), exc)]
    trace = "".join(lines).replace(filename, shown)
    return {"output_type": "error", "ename": type(exc).__name__, "evalue": str(exc), "traceback": trace.rstrip("\n").split("\n")}


def run_captured(code: str, namespace: dict[str, Any], *, shown: str = _FILENAME, figures: bool = True,
                 on_change: Callable[[Captured], None] | None = None) -> Captured:
    """Runs ``code`` in ``namespace`` in this thread and returns everything it showed.

    Args:
        code: Python source; a final expression's value becomes an ``execute_result``.
        namespace: the globals it runs in (the notebook's user namespace in a kernel).
        shown: the file name tracebacks show for the code (``<cell 3>``).
        figures: save the matplotlib figures the code leaves open as image outputs.
        on_change: called in this thread each time the outputs grow (``Captured.on_change``).
    """
    # Each snippet its own file name: tracebacks quote its lines even while another one runs.
    filename = f"<agent-{next(_numbers)}>"
    captured = Captured(on_change=on_change)
    try:
        body, last = _split_last_expression(code, filename)
    except SyntaxError as exc:
        error = _error(exc, filename, shown)
        error["traceback"] = "".join(traceback.format_exception_only(type(exc), exc)).replace(filename, shown).rstrip("\n").split("\n")
        captured.outputs.append(error)
        captured.failed = True
        return captured
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    before = _open_figures() if figures else set()
    _start(captured)
    try:
        exec(compile(body, filename, "exec"), namespace)
        if last is not None:
            result = eval(compile(last, filename, "eval"), namespace)
            if result is not None:
                captured.value = result
                namespace["_"] = result
                captured.outputs.append({"output_type": "execute_result", "data": _bundle(result), "metadata": {}, "execution_count": None})
    except BaseException as exc:  # the code's own exceptions (SystemExit and KeyboardInterrupt too)
        captured.outputs.append(_error(exc, filename, shown))
        captured.failed = True
    finally:
        _stop()
        linecache.cache.pop(filename, None)
        if figures:
            _save_figures(captured, before)
    return captured
