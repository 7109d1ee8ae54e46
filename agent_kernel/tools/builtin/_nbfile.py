"""tools.builtin.nbfile — a notebook file as the notebook tools read and write it.

One place opens, parses, finds cells in and saves ``.ipynb`` files, so every notebook tool holds
to the same rules:

- Paths go through the run's ``Workspace`` (confined, canonical, deny rules re-checked on the
  file really opened), like the file tools.
- A save is atomic: the new notebook is written to a temporary file beside it and renamed over
  it through the folder's descriptor, so a crash, a full disk or a bad cell never leaves half a
  notebook.
- A save never overwrites edits it has not seen: each read records the file's fingerprint for
  the run (``extras["notebook_reads"]``), and an edit refuses when the file on disk is no longer
  what was read (the person saved newer edits), asking the model to read it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from dataclasses import dataclass
from typing import Any

from agent_kernel.errors import ToolError
from agent_kernel.guard._paths import PathArgument, PathKey, Resolved
from agent_kernel.tools._tool import ToolContext
from agent_kernel.tools.builtin._workspace import guard, workspace

#: The permission key of a call without ``path`` when the gate cannot tell which notebook it means.
UNKNOWN_NOTEBOOK = "<current notebook>"

#: Where a run keeps the fingerprint of each notebook it read (canonical path -> sha256).
READS_KEY = "notebook_reads"

# One writer at a time per file in this process: the check for newer edits and the rename are
# one step for the tools.
_saving = threading.Lock()


def default_notebook(ctx: ToolContext | None = None) -> str:
    """The notebook a call without ``path`` means: the kernel's own notebook.

    ``extras["notebook_path"]`` when the caller set it, else the path Jupyter gives the kernel
    (``JPY_SESSION_NAME``; relative to the server's root, so the kernel's folder is tried by the
    file's name too), else VS Code's ``__vsc_ipynb_file__``.

    Raises:
        ToolError: no notebook is known (outside Jupyter): the model must pass ``path``.
    """
    extras = ctx.extras if ctx is not None else {}
    given = extras.get("notebook_path") or os.environ.get("JPY_SESSION_NAME") or extras.get("__vsc_ipynb_file__")
    if given:
        given = str(given)
        if os.path.isabs(given) or os.path.exists(given):
            return given
        if os.path.exists(os.path.basename(given)):
            return os.path.basename(given)
        return given
    raise ToolError("No notebook is open in this kernel, so there is no default; pass path='name.ipynb' (relative to the working directory).")


class NotebookPath(PathArgument):
    """The ``permission_key`` of a notebook tool: its ``path``, or the kernel's own notebook.

    Rules like ``edit_notebook(analysis.ipynb)`` match every spelling of the notebook, and a call
    without ``path`` is judged on the notebook it will really change.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("path", "")

    def _path(self, arguments: dict[str, Any]) -> str:
        given = arguments.get("path")
        if given:
            return str(given)
        try:
            return default_notebook()
        except ToolError:
            # The default comes from the run's extras, which the gate cannot see: a key that names
            # no file, so only rules for every notebook match it and the mode decides (the deny
            # rules are checked again on the file the tool opens).
            return UNKNOWN_NOTEBOOK

    def __call__(self, arguments: dict[str, Any]) -> str:
        path = self._path(arguments)
        return os.path.normpath(path) if path else path

    def canonical(self, arguments: dict[str, Any], working_dir: str | os.PathLike[str] | None) -> PathKey:
        from agent_kernel.guard._paths import Workspace

        return Workspace(working_dir).canonical(self._path(arguments))


@dataclass
class NotebookDoc:
    """A notebook read from disk.

    Attributes:
        target: its canonical path in the workspace.
        nb: the parsed notebook (``nbformat.NotebookNode``, version 4).
        fingerprint: the sha256 of the bytes read.
    """

    target: Resolved
    nb: Any
    fingerprint: str


def _fingerprint(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_bytes(ctx: ToolContext | None, path: str, tool_name: str) -> tuple[bytes, Resolved]:
    ws = workspace(ctx)
    if not path.endswith(".ipynb"):
        raise ToolError(f"{path!r} is not a notebook (a notebook's name ends in .ipynb); use read_file for other files.")
    try:
        fd, resolved, _ = ws.open(path, guard=guard(ctx, tool_name))
    except ToolError as exc:
        if str(exc).startswith("No such file"):
            raise ToolError(f"No such notebook: {path!r}. Use glob('**/*.ipynb') to find notebooks, or edit_notebook(action='insert') on a new path to start one.") from None
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    _check_suffix(path, resolved)
    return data, resolved


def _check_suffix(path: str, resolved: Resolved) -> None:
    """Refuses a notebook name that leads to a file that is not one: a link ``notes.ipynb`` to
    ``AGENTS.md`` would otherwise have a notebook tool write the file the next session obeys."""
    if not resolved.rel.endswith(".ipynb"):
        raise ToolError(f"{path!r} leads to {resolved.rel!r}, which is not a notebook (a link to another kind of file); "
                        "the notebook tools only read and write .ipynb files.")


def parse(data: bytes, shown: str) -> Any:
    """The notebook in ``data``, upgraded to nbformat 4.

    Raises:
        ToolError: it is not JSON, or not a valid notebook (saying what is wrong).
    """
    import nbformat

    try:
        nb = nbformat.reads(data.decode("utf-8", errors="replace"), as_version=4)
    except Exception as exc:  # nbformat raises JSON errors, NotJSONError, KeyError and others
        raise ToolError(f"{shown!r} is not a valid notebook ({type(exc).__name__}: {str(exc)[:300]}); read it with read_file to see what it holds.") from None
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        raise ToolError(f"{shown!r} does not follow the notebook format ({exc.message[:300]}); "
                        "fix it in Jupyter or with read_file/edit_file before editing cells.") from None
    return nb


def load(ctx: ToolContext | None, path: str, tool_name: str) -> NotebookDoc:
    """Reads and parses the notebook ``path`` (confined to the workspace, deny rules applied)."""
    data, resolved = _read_bytes(ctx, path, tool_name)
    return NotebookDoc(resolved, parse(data, resolved.rel), _fingerprint(data))


class _Cells:
    """A notebook read for reading only: its cells as plain dicts (``nb.cells``, ``cell.get``)."""

    __slots__ = ("cells", "metadata")

    def __init__(self, cells: list[dict[str, Any]], metadata: dict[str, Any]) -> None:
        self.cells = cells
        self.metadata = metadata


_CELL_TYPES = ("code", "markdown", "raw")


def load_for_reading(ctx: ToolContext | None, path: str, tool_name: str) -> NotebookDoc:
    """``load``, for a read: a version-4 notebook is checked for the shape the tools rely on and
    kept as plain dicts, without nbformat's full validation (the slow part of a read); any other
    version goes through nbformat (upgraded). Never saved: edits use ``load``."""
    import json

    data, resolved = _read_bytes(ctx, path, tool_name)
    try:
        raw = json.loads(data.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise ToolError(f"{resolved.rel!r} is not a valid notebook (not JSON: {exc}); read it with read_file to see what it holds.") from None
    if isinstance(raw, dict) and raw.get("nbformat") == 4 and isinstance(raw.get("cells"), list):
        cells = raw["cells"]
        for index, cell in enumerate(cells):
            if not isinstance(cell, dict) or cell.get("cell_type") not in _CELL_TYPES or not isinstance(cell.get("source", ""), (str, list)) \
                    or not isinstance(cell.get("outputs", []), list) or not all(isinstance(o, dict) for o in cell.get("outputs", [])):
                raise ToolError(f"{resolved.rel!r} does not follow the notebook format (cell {index} is not a code, markdown or raw cell "
                                "with a source); fix it in Jupyter or with read_file/edit_file.")
        found = raw.get("metadata")
        metadata: dict[str, Any] = found if isinstance(found, dict) else {}
        return NotebookDoc(resolved, _Cells(cells, metadata), _fingerprint(data))
    return NotebookDoc(resolved, parse(data, resolved.rel), _fingerprint(data))


def new_notebook(ctx: ToolContext | None, path: str, tool_name: str) -> NotebookDoc:
    """An empty notebook to be saved at ``path`` (which does not exist yet)."""
    import nbformat

    if not path.endswith(".ipynb"):
        raise ToolError(f"{path!r} is not a notebook name; a notebook's name ends in .ipynb.")
    resolved = workspace(ctx).resolve(path)
    _check_suffix(path, resolved)
    check = guard(ctx, tool_name)
    if check is not None:
        check(resolved.rel)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return NotebookDoc(resolved, nb, "")


def remember_read(ctx: ToolContext | None, doc: NotebookDoc) -> None:
    """Records that the run has seen ``doc`` as it is now (edits are checked against it)."""
    if ctx is not None:
        ctx.extras.setdefault(READS_KEY, {})[doc.target.rel] = doc.fingerprint


def check_fresh(ctx: ToolContext | None, doc: NotebookDoc) -> None:
    """Refuses an edit to a notebook the run has not read, or that changed since it read it."""
    seen = (ctx.extras.get(READS_KEY) or {}).get(doc.target.rel) if ctx is not None else None
    if seen is None:
        raise ToolError(f"Read {doc.target.rel} with read_notebook before editing it, so you edit the cells as they are now.")
    if seen != doc.fingerprint:
        raise ToolError(f"{doc.target.rel} changed on disk since you read it (someone saved newer edits). "
                        "Nothing was written. Call read_notebook again and make your edit on what it shows now.")


def find_cell(nb: Any, cell: int | str | None, *, shown: str) -> int:
    """The index of ``cell`` (an index, negative from the end, or a cell id) in ``nb``.

    Raises:
        ToolError: no such cell, saying how many cells there are and how to see their ids.
    """
    count = len(nb.cells)
    if isinstance(cell, bool) or cell is None:
        raise ToolError(f"Name a cell by its index (0 to {count - 1}) or its id; read_notebook shows both.")
    # An index written as text: ASCII digits only ("²" and "٣" are digits to str.isdigit, not to int).
    numeric = isinstance(cell, str) and cell.lstrip("-").isascii() and cell.lstrip("-").isdigit()
    if isinstance(cell, int) or (numeric and not any(c.get("id") == cell for c in nb.cells)):
        index = int(cell)
        if -count <= index < count:
            return index % count
        raise ToolError(f"{shown} has {count} cells (indexes 0 to {count - 1}); there is no cell {index}. Call read_notebook to see them.")
    for index, c in enumerate(nb.cells):
        if c.get("id") == cell:
            return index
    raise ToolError(f"{shown} has no cell with id {cell!r}. Call read_notebook to see the cells' ids.")


def save(ctx: ToolContext | None, doc: NotebookDoc, tool_name: str) -> str:
    """Writes ``doc.nb`` over its file atomically; returns the new fingerprint.

    The file must still be what ``doc`` was read from (a new file: must still not exist), checked
    just before the rename, so the person's newer edits are never overwritten.

    Raises:
        ToolError: the file changed meanwhile, the notebook is invalid, or it cannot be written.
    """
    import nbformat

    try:
        nbformat.validate(doc.nb)
    except nbformat.ValidationError as exc:
        raise ToolError(f"The edit would make an invalid notebook ({exc.message[:300]}); nothing was written.") from None
    data = (nbformat.writes(doc.nb) + "\n").encode("utf-8")
    ws = workspace(ctx)
    rel = doc.target.rel
    check = guard(ctx, tool_name)
    if check is not None:
        check(rel)
    folder, name = os.path.split(rel)
    with _saving:
        dir_fd = _open_folder(ws, folder)
        try:
            _check_unchanged(dir_fd, name, doc)
            temp = f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                _check_unchanged(dir_fd, name, doc)
                os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dir_fd)
                raise
        except OSError as exc:
            raise ToolError(f"Could not write {rel} ({exc.strerror or exc}); nothing was changed.") from None
        finally:
            os.close(dir_fd)
    fingerprint = _fingerprint(data)
    doc.fingerprint = fingerprint
    remember_read(ctx, doc)
    return fingerprint


def _open_folder(ws: Any, folder: str) -> int:
    if not folder:
        return os.open(ws.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        return int(ws.open_dir(folder))
    except ToolError:
        raise ToolError(f"The folder {folder!r} does not exist; make it first (or put the notebook in an existing folder).") from None


def _check_unchanged(dir_fd: int, name: str, doc: NotebookDoc) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dir_fd)
    except FileNotFoundError:
        if doc.fingerprint:
            raise ToolError(f"{doc.target.rel} was deleted or moved since it was read; nothing was written. Call read_notebook to see where things stand.") from None
        return
    with os.fdopen(fd, "rb") as f:
        current = _fingerprint(f.read())
    if current != doc.fingerprint:
        raise ToolError(f"{doc.target.rel} changed on disk since it was read (someone saved newer edits); nothing was written. "
                        "Call read_notebook again and make the edit on what it shows now.")
