"""tools.builtin.notebook — the notebook as the agent's workspace: ``read_notebook``,
``edit_notebook`` and ``run_cell``.

- ``read_notebook`` shows cells with their index, id, type, execution count, provenance, source
  and outputs (images as images), nearest cells first when the budget is short. Read-only.
- ``edit_notebook`` inserts, replaces or deletes one cell. It is a write (``category="edit"``,
  like ``write_file``): it asks in ``default`` mode, ``accept_edits`` runs it, ``plan`` refuses
  it, and rules name the notebook (``edit_notebook(analysis.ipynb)``); a ``deny write_file(...)``
  rule holds for it too. Its approval card shows the cell's new source, a diff for a replace.
- ``run_cell`` runs a code cell and writes its outputs and execution count into the notebook;
  the model reads the outputs (errors included). It executes code (``category="execute"``), so
  it asks as the ``python`` tool does.

Every save is atomic and refuses when the file changed since the run read it (``nbfile``).
Cells the agent writes carry ``metadata.agent_kernel`` = ``{run_id, turn, call_id, action}``, and
each edit and run is journaled (``notebook_edit``, ``notebook_run``), the cell before an edit
included, so a run's edits can be undone (``undo_run_edits``).

**Live or file.** Where the kernel's own notebook is open in JupyterLab 4 or Notebook 7 with the
package's front-end extension, the tools read and change the open document (``_nblive``): an edit
shows at once, a run's outputs and execution count appear in the cell, and the file is left to the
person's save (writing it underneath the open document would make the two fight). Everywhere else
(VS Code, Colab, a plain kernel, a notebook that is not the kernel's own) edits go to the saved
file, and where that notebook is open the result says honestly that it needs a reload.
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent_kernel.errors import ToolError
from agent_kernel.tools._tool import Tool, ToolContext, ToolResult
from agent_kernel.tools.builtin import _nbfile as nbfile
from agent_kernel.tools.builtin._nbfile import NotebookDoc, NotebookPath, default_notebook, find_cell
from agent_kernel.tools.builtin._nblive import LiveNotebook, LiveUnavailable, live_notebooks, open_live
from agent_kernel.tools.builtin._nbrender import DEFAULT_BUDGET_CHARS, inert, output_images, render_cells, render_outputs
from agent_kernel.tools.builtin._python import PYTHON_WARNING, user_namespace
from agent_kernel.tools.builtin._workspace import guard, workspace

#: The cell metadata key holding a cell's provenance (which run, turn and call wrote it).
PROVENANCE_KEY = "agent_kernel"
#: Seconds ``run_cell`` lets a cell run before interrupting it (``extras["run_cell_timeout"]``).
DEFAULT_RUN_TIMEOUT = 120.0

CellType = Literal["code", "markdown", "raw"]

RELOAD_NOTE = ("The change is in the saved file only: the notebook open in Jupyter does not show it until it is "
               "reloaded (File > Reload Notebook from Disk), and saving the open notebook first would overwrite it.")


LIVE_NOTE = "The notebook open in Jupyter shows it now; the file is written when the notebook is saved."


def _path(ctx: ToolContext, path: str | None) -> str:
    return path if path else default_notebook(ctx)


@dataclass
class _Live:
    """The kernel's own notebook as its front end holds it open, and a copy of it read just now."""

    notebook: LiveNotebook
    doc: NotebookDoc


async def _open_live(ctx: ToolContext, path: str, tool_name: str) -> _Live | None:
    """The open document of ``path`` when it is the kernel's own notebook and a front end that
    takes edits shows it; None otherwise (the tools then use the file)."""
    if live_notebooks() is None or not _has_shell():
        return None
    try:
        own = default_notebook(ctx)
        ws = workspace(ctx)
        resolved = ws.resolve(path)
        if ws.canonical(own) != resolved.rel:
            return None
    except Exception:  # an unknown or refused path: the file route says what is wrong with it
        return None
    check = guard(ctx, tool_name)
    if check is not None:
        check(resolved.rel)
    notebook = await open_live(Path(resolved.path))
    answer = None
    if notebook is not None:
        try:
            answer = await notebook.request("read")
        except LiveUnavailable:
            pass
    if notebook is None or answer is None:
        _last_seen_live.pop(str(resolved.path), None)  # cards go back to the file
        return None
    import nbformat

    content = answer.get("notebook") or {}
    nb = nbformat.from_dict(content)
    for cell in nb.get("cells", []):
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
    fingerprint = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    _last_seen_live[str(resolved.path)] = nb
    return _Live(notebook, NotebookDoc(resolved, nb, fingerprint))


# The open document as last read, by absolute path: an approval card (which cannot wait for the
# front end) shows its diff against what the person sees rather than an older saved file.
_last_seen_live: dict[str, Any] = {}


def _card_doc(ctx: ToolContext, path: str | None, tool_name: str) -> NotebookDoc:
    """The notebook an approval card describes: the open document as last read, else the file."""
    target = _path(ctx, path)
    if _last_seen_live and live_notebooks() is not None:
        try:
            resolved = workspace(ctx).resolve(target)
        except Exception:
            resolved = None
        if resolved is not None and str(resolved.path) in _last_seen_live:
            return NotebookDoc(resolved, _last_seen_live[str(resolved.path)], "")
    return nbfile.load(ctx, target, tool_name)


def _cell_json(cell: Any) -> dict[str, Any]:
    """What the front end needs to show ``cell`` (outputs are sent by ``run_cell``)."""
    return {"cell_type": cell.get("cell_type", "code"), "id": str(cell.get("id", "")),
            "source": "".join(cell.get("source", "")), "metadata": copy.deepcopy(dict(cell.get("metadata") or {}))}


def _is_kernel_notebook(ctx: ToolContext, doc: NotebookDoc) -> bool:
    """True when ``doc`` is the notebook the kernel running the agent belongs to."""
    try:
        own = default_notebook(ctx)
    except ToolError:
        return False
    try:
        return workspace(ctx).canonical(own) == doc.target.rel
    except Exception:
        return False


def _open_in_front_end(ctx: ToolContext, doc: NotebookDoc) -> bool:
    """True when a front end holds ``doc`` open (the agent runs in a kernel of that notebook).

    Edits reach only the file, so the tools then say the open notebook needs a reload.
    """
    return _has_shell() and _is_kernel_notebook(ctx, doc)


def _running_cell(ctx: ToolContext, nb: Any) -> int | None:
    """The index of the agent's own cell in ``nb`` (``extras["notebook_cell_id"]``), or None."""
    cell_id = ctx.extras.get("notebook_cell_id")
    if not cell_id:
        return None
    return next((i for i, c in enumerate(nb.cells) if c.get("id") == cell_id), None)


def _provenance(ctx: ToolContext, action: str) -> dict[str, Any]:
    run = ctx.run
    emitter = getattr(run, "emitter", None)
    turn = getattr(getattr(emitter, "turn", None), "turn_counter", None)
    return {"run_id": getattr(run, "run_id", None), "turn": turn, "call_id": ctx.call_id, "action": action}


def _emit(ctx: ToolContext, kind: str, data: Any) -> None:
    from agent_kernel.events._event import EventType

    emitter = getattr(ctx.run, "emitter", None)
    if emitter is not None:
        emitter.later(EventType(kind), data)


def _cells_wanted(nb: Any, cells: list[int | str] | None, shown: str) -> list[int] | None:
    if cells is None:
        return None
    if not isinstance(cells, list) or not cells:
        raise ToolError("cells is a list of cell indexes or ids, e.g. [0, 3, 'a1b2c3'], or leave it out to read the whole notebook.")
    return sorted({find_cell(nb, c, shown=shown) for c in cells})


async def _read_notebook(ctx: ToolContext, path: str | None = None, cells: list[int | str] | None = None) -> ToolResult:
    """Reads a Jupyter notebook: each cell's index, id, type, execution count, source and outputs
    (errors with their traceback, tables compactly, plots as images). Without path: the notebook
    this agent runs in. Read a notebook before editing it.

    Args:
        path: the .ipynb file, relative to the working directory (default: the current notebook).
        cells: only these cells, by index or id (default: all, nearest to the current cell first when long).
    """
    target = _path(ctx, path)
    live = await _open_live(ctx, target, "read_notebook")
    doc = live.doc if live is not None else nbfile.load_for_reading(ctx, target, "read_notebook")
    nbfile.remember_read(ctx, doc)
    wanted = _cells_wanted(doc.nb, cells, doc.target.rel)
    budget = int(ctx.extras.get("notebook_read_chars", DEFAULT_BUDGET_CHARS))
    rendered = render_cells(doc.nb, doc.target.rel, wanted, anchor=_running_cell(ctx, doc.nb), budget=budget)
    return ToolResult(rendered.text, images=tuple(rendered.images))


def _new_cell(cell_type: str, source: str) -> Any:
    import nbformat

    if cell_type == "markdown":
        return nbformat.v4.new_markdown_cell(source)
    if cell_type == "raw":
        return nbformat.v4.new_raw_cell(source)
    return nbformat.v4.new_code_cell(source)


def _cell_id(nb: Any, fingerprint: str, call_id: str) -> str:
    """A new cell's id, from the notebook it goes into and the call inserting it: the same edit of
    the same notebook gives the same id (so stored outputs and tests stay stable), unique in ``nb``."""
    taken = {c.get("id") for c in nb.cells}
    for attempt in range(100):
        candidate = hashlib.sha256(f"{fingerprint}:{call_id}:{attempt}".encode()).hexdigest()[:8]
        if candidate not in taken:
            return candidate
    raise ToolError("Could not find a free cell id; the notebook has too many cells with clashing ids.")


def _load_for_edit(ctx: ToolContext, path: str, action: str) -> NotebookDoc:
    try:
        doc = nbfile.load(ctx, path, "edit_notebook")
    except ToolError as exc:
        if action == "insert" and str(exc).startswith("No such notebook"):
            return nbfile.new_notebook(ctx, path, "edit_notebook")  # the first insert makes the notebook
        raise
    nbfile.check_fresh(ctx, doc)
    return doc


async def _edit_notebook(
    action: Literal["insert", "replace", "delete"],
    ctx: ToolContext,
    cell: int | str | None = None,
    source: str | None = None,
    cell_type: CellType | None = None,
    path: str | None = None,
) -> str:
    """Changes one cell of a Jupyter notebook: insert a new cell, replace a cell's source, or
    delete a cell. Read the notebook first; an edit to a notebook that changed since you read
    it is refused. New and replaced cells are not run: call run_cell for that.

    Args:
        action: insert (a new cell after `cell`), replace (the source of `cell`) or delete (`cell`).
        cell: the cell, by index or id. For insert: the new cell goes after it (-1: at the top;
            default: after the current cell, or at the end).
        source: the cell's new source (insert and replace).
        cell_type: code, markdown or raw (insert: default code; replace: default unchanged).
        path: the .ipynb file, relative to the working directory (default: the current notebook).
    """
    if action not in ("insert", "replace", "delete"):
        raise ToolError(f"action must be insert, replace or delete; got {action!r}.")
    if action != "delete" and source is None:
        raise ToolError(f"{action} needs source: the cell's complete new text.")
    if cell_type is not None and cell_type not in ("code", "markdown", "raw"):
        raise ToolError(f"cell_type must be code, markdown or raw; got {cell_type!r}.")
    target_path = _path(ctx, path)
    live = await _open_live(ctx, target_path, "edit_notebook")
    if live is not None:
        doc = live.doc
        if (ctx.extras.get(nbfile.READS_KEY) or {}).get(doc.target.rel) is None:
            raise ToolError(f"Read {doc.target.rel} with read_notebook before editing it, so you edit the cells as they are now.")
    else:
        doc = _load_for_edit(ctx, target_path, action)
    nb, shown = doc.nb, doc.target.rel
    previous: dict[str, Any] | None = None
    if action == "insert":
        assert source is not None
        if cell is None:
            running = _running_cell(ctx, nb)
            index = len(nb.cells) if running is None else running + 1
        elif cell == -1 or cell == "-1":
            index = 0
        else:
            index = find_cell(nb, cell, shown=shown) + 1
        new = _new_cell(cell_type or "code", source)
        new.id = _cell_id(nb, doc.fingerprint, ctx.call_id)
        new.metadata[PROVENANCE_KEY] = _provenance(ctx, "insert")
        nb.cells.insert(index, new)
        changed = new
        said = f"Inserted {new.cell_type} cell {index} (id {new.id}) in {shown}."
    else:
        index = find_cell(nb, cell, shown=shown)
        target = nb.cells[index]
        previous = copy.deepcopy(dict(target))
        if action == "delete":
            del nb.cells[index]
            changed = target
            said = f"Deleted {target.cell_type} cell {index} (id {target.get('id')}) from {shown}; {len(nb.cells)} cells remain."
        else:
            assert source is not None
            kind = cell_type or target.cell_type
            if kind != target.cell_type:
                replacement = _new_cell(kind, source)
                replacement.id = target.get("id", replacement.id)
                replacement.metadata = copy.deepcopy(target.metadata)
                nb.cells[index] = target = replacement
            target.source = source
            if target.cell_type == "code":
                target.outputs, target.execution_count = [], None  # the old outputs no longer belong to this source
            target.metadata[PROVENANCE_KEY] = _provenance(ctx, "replace")
            changed = target
            said = f"Replaced the source of {kind} cell {index} (id {target.get('id')}) in {shown}; it has not been run."
    if live is not None:
        shown_index = await _apply_live(live.notebook, action, nb, index, changed)
        if action == "insert":  # where the open notebook put it (the person may have added cells above meanwhile)
            index = shown_index
            said = f"Inserted {changed.cell_type} cell {index} (id {changed.get('id')}) in {shown}."
        fingerprint = ""  # the file is not written: the person's save writes it
    else:
        fingerprint = nbfile.save(ctx, doc, "edit_notebook")
    _emit(ctx, "notebook_edit", {
        "path": shown, "action": action, "cell_id": str(changed.get("id", "")), "index": index,
        "cell_type": str(changed.get("cell_type", "code")), "source": None if action == "delete" else source,
        "previous": previous, "call_id": ctx.call_id, "live": live is not None, "fingerprint": fingerprint,
    })
    if live is not None:
        said += " " + LIVE_NOTE
    elif _open_in_front_end(ctx, doc):
        said += " " + RELOAD_NOTE
    return said


async def _apply_live(notebook: LiveNotebook, action: str, nb: Any, index: int, changed: Any) -> int:
    """Makes the open notebook show an edit already made to ``nb`` (the copy read from it);
    returns the cell's index there (an insert goes after a cell named by id, wherever it is now).

    Raises:
        ToolError: the open notebook refused it or did not confirm it.
    """
    try:
        if action == "insert":
            after = nb.cells[index - 1].get("id") if index > 0 else None
            answer = await notebook.request("insert", after=after, cell=_cell_json(changed))
            ids = answer.get("cell_ids")
            shown = answer.get("index")
            if isinstance(ids, list) and isinstance(shown, int) and 0 <= shown < len(ids):
                changed["id"] = str(ids[shown])  # the id the open notebook gave it (the same, unless it refuses ids)
                return shown
            return index
        if action == "delete":
            await notebook.request("delete", cell_id=str(changed.get("id", "")))
        else:
            await notebook.request("replace", cell=_cell_json(changed))
        return index
    except LiveUnavailable:
        raise ToolError("The notebook open in Jupyter closed its connection before the edit; nothing was changed. "
                        "Read the notebook again and repeat the edit.") from None


def _run_timeout(ctx: ToolContext) -> float:
    value = ctx.extras.get("run_cell_timeout", DEFAULT_RUN_TIMEOUT)
    return float(value) if isinstance(value, (int, float)) and value > 0 else DEFAULT_RUN_TIMEOUT


def _next_count(nb: Any) -> int:
    counts = [c.get("execution_count") for c in nb.cells if c.get("cell_type") == "code"]
    return max([n for n in counts if isinstance(n, int)] or [0]) + 1


async def _run_cell(cell: int | str, ctx: ToolContext, path: str | None = None) -> ToolResult:
    """Runs one code cell of a Jupyter notebook and returns its outputs (errors included, plots as
    images); the outputs and execution count are saved in the notebook as if the person had run
    it. In the notebook this agent runs in, the cell runs in the user's namespace.

    Args:
        cell: the cell, by index or id.
        path: the .ipynb file, relative to the working directory (default: the current notebook).
    """
    from agent_kernel.tools.builtin import _nbrun

    target_path = _path(ctx, path)
    live = await _open_live(ctx, target_path, "run_cell")
    if live is not None:
        doc = live.doc  # the cell is named by id or index in the document as the person sees it now
    else:
        doc = nbfile.load(ctx, target_path, "run_cell")
        nbfile.check_fresh(ctx, doc)
    nb, shown = doc.nb, doc.target.rel
    index = find_cell(nb, cell, shown=shown)
    target = nb.cells[index]
    if target.cell_type != "code":
        raise ToolError(f"Cell {index} of {shown} is a {target.cell_type} cell; only code cells run.")
    timeout = _run_timeout(ctx)
    in_kernel = _is_kernel_notebook(ctx, doc) and (ctx.extras.get("namespace") is not None or _has_shell())
    cell_id = str(target.get("id", ""))
    count = _next_count(nb)
    feed: _OutputFeed | None = None
    if live is not None and in_kernel:
        # The old outputs go at once, the count shows the cell is being run, and what it prints
        # appears as it comes.
        await _show_outputs(live.notebook, cell_id, [], count, index)
        feed = _OutputFeed(live.notebook, cell_id, count)
    if in_kernel:
        try:
            run = await _nbrun.run_in_process(target.source, user_namespace(ctx), index, timeout,
                                              on_change=feed.changed if feed is not None else None)
        finally:
            if feed is not None:
                await feed.close()
        run.execution_count = count
        for output in run.outputs:
            if output["output_type"] == "execute_result":
                output["execution_count"] = run.execution_count
    else:
        run = await _nbrun.run_in_kernel(ctx.extras, doc.target.rel, nb, index, _nbrun.folder_of(str(doc.target.path)), timeout)
    if live is not None:
        saved = target
        saved.outputs = _as_nodes(run.outputs)
        saved.execution_count = run.execution_count
        await _show_outputs(live.notebook, cell_id, saved.outputs, run.execution_count, index)
    else:
        # The file is read again: the run may have taken a while, and the person's edits meanwhile win.
        fresh = nbfile.load(ctx, shown, "run_cell")
        if fresh.fingerprint != doc.fingerprint:
            raise ToolError(f"Cell {index} ran, but {shown} changed on disk while it ran, so its outputs were not saved "
                            f"(the person's edits win). Its outputs:\n{inert(render_outputs(_as_nodes(run.outputs)))}")
        saved = fresh.nb.cells[index]
        saved.outputs = _as_nodes(run.outputs)
        saved.execution_count = run.execution_count
        nbfile.save(ctx, fresh, "run_cell")
    images = [image for output in saved.outputs for image in output_images(output)]
    error = next((o for o in saved.outputs if o.get("output_type") == "error"), None)
    _emit(ctx, "notebook_run", {
        "path": shown, "cell_id": str(saved.get("id", "")), "index": index, "mode": run.mode, "status": run.status,
        "execution_count": run.execution_count, "outputs": len(saved.outputs), "images": len(images),
        "error": f"{error.get('ename')}: {error.get('evalue')}" if error else None, "duration_s": round(run.duration_s, 6),
        "call_id": ctx.call_id, "live": live is not None,
    })
    body = render_outputs(saved.outputs) or "(no output)"
    head = {"ok": f"Ran cell {index} (id {saved.get('id')}) of {shown}: [{run.execution_count}]",
            "error": f"Cell {index} (id {saved.get('id')}) of {shown} raised an error: [{run.execution_count}]",
            "timeout": f"Cell {index} (id {saved.get('id')}) of {shown} timed out and was interrupted:"}.get(run.status, f"Cell {index}: {run.status}")
    text = f"{head}\n<notebook-data>\n{inert(body)}\n</notebook-data>"
    if live is not None:
        text += "\n" + LIVE_NOTE
    elif _open_in_front_end(ctx, doc):
        text += "\n" + RELOAD_NOTE
    return ToolResult(text, is_error=run.status != "ok", images=tuple(images[:4]))


class _OutputFeed:
    """Shows a running cell's outputs in the open notebook as they grow: one request in flight at
    a time, the newest outputs next, so a cell that prints fast costs a few requests, not one per line."""

    def __init__(self, notebook: LiveNotebook, cell_id: str, count: int) -> None:
        self.notebook, self.cell_id, self.count = notebook, cell_id, count
        self.loop = asyncio.get_running_loop()
        self.latest: list[dict[str, Any]] = []
        self.again = False
        self.sending: asyncio.Task[None] | None = None
        self.closed = False

    def changed(self, captured: Any) -> None:
        """Called in the cell's thread each time its outputs grow."""
        outputs = [dict(o) for o in list(captured.outputs)]  # a copy: the thread keeps writing
        self.loop.call_soon_threadsafe(self._kick, outputs)

    def _kick(self, outputs: list[dict[str, Any]]) -> None:
        if self.closed:
            return
        self.latest = outputs
        if self.sending is None or self.sending.done():
            self.sending = self.loop.create_task(self._send())
        else:
            self.again = True

    async def _send(self) -> None:
        while True:
            self.again = False
            try:
                await self.notebook.request("outputs", cell_id=self.cell_id, outputs=_as_nodes(self.latest), execution_count=self.count)
            except Exception:  # the final outputs are sent (and their failure reported) by run_cell
                return
            if not self.again or self.closed:
                return

    async def close(self) -> None:
        """Stops feeding and waits for a request in flight (the final outputs come after it)."""
        self.closed = True
        if self.sending is not None:
            await asyncio.gather(self.sending, return_exceptions=True)


async def _show_outputs(notebook: LiveNotebook, cell_id: str, outputs: list[Any], count: int | None, index: int) -> None:
    """Puts ``outputs`` and ``count`` into the open notebook's cell ``cell_id``."""
    try:
        await notebook.request("outputs", cell_id=cell_id, outputs=[dict(o) for o in outputs], execution_count=count)
    except LiveUnavailable:
        shown = inert(render_outputs(outputs)) if outputs else ""
        raise ToolError(f"The notebook open in Jupyter closed its connection, so cell {index} does not show its outputs. "
                        f"Read the notebook again before running it. {shown}".rstrip()) from None


def _has_shell() -> bool:
    import sys

    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None


def _as_nodes(outputs: list[dict[str, Any]]) -> list[Any]:
    import nbformat

    nodes = []
    for output in outputs:
        node = nbformat.from_dict(copy.deepcopy(output))
        if node.get("output_type") == "stream" and isinstance(node.get("text"), list):
            node["text"] = "".join(node["text"])
        nodes.append(node)
    return nodes


# -- the approval card -------------------------------------------------------------------------


def describe_edit(arguments: dict[str, Any], working_dir: Any = None) -> str | None:
    """What an ``edit_notebook`` call would change, for its approval card (reads, never writes)."""
    action = arguments.get("action")
    source = arguments.get("source")
    cell = arguments.get("cell")
    ctx = ToolContext("", "edit_notebook", working_dir)
    if action == "insert" and isinstance(source, str):
        return f"New {arguments.get('cell_type') or 'code'} cell:\n{source}"
    try:
        doc = _card_doc(ctx, arguments.get("path"), "edit_notebook")
        index = find_cell(doc.nb, cell, shown=doc.target.rel)
    except (ToolError, TypeError, ValueError):
        return None
    old = "".join(doc.nb.cells[index].get("source", ""))
    if action == "delete":
        return f"Delete cell {index}:\n{old}"
    if action == "replace" and isinstance(source, str):
        diff = difflib.unified_diff(old.splitlines(), source.splitlines(), f"cell {index} (now)", f"cell {index} (new)", lineterm="")
        return "\n".join(diff) or "(the source is unchanged)"
    return None


class NotebookEditTool(Tool):
    """``edit_notebook``: a ``Tool`` whose approval card shows the change (``describe_call``)."""

    def describe_call(self, arguments: dict[str, Any], working_dir: Any = None) -> str | None:
        """The cell's new source, a diff for a replace, the old source for a delete."""
        return describe_edit(arguments, working_dir)


class RunCellTool(Tool):
    """``run_cell``: runs code like the ``python`` tool, and its approval requests say so."""

    approval_warning = PYTHON_WARNING

    def describe_call(self, arguments: dict[str, Any], working_dir: Any = None) -> str | None:
        """The source of the cell that would run."""
        ctx = ToolContext("", "run_cell", working_dir)
        try:
            doc = _card_doc(ctx, arguments.get("path"), "run_cell")
            index = find_cell(doc.nb, arguments.get("cell"), shown=doc.target.rel)
        except (ToolError, TypeError, ValueError):
            return None
        return f"Run cell {index}:\n{''.join(doc.nb.cells[index].get('source', ''))}"


# -- undo --------------------------------------------------------------------------------------


def _undo_steps(nb: Any, steps: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """Reverts ``steps`` (one notebook's edits, in the order made) in ``nb``; returns the requests
    that make an open notebook show the same (``_nblive``).

    Raises:
        ToolError: a cell the run wrote was changed since (``nb`` is then half reverted: drop it).
    """
    import nbformat

    requests: list[dict[str, Any]] = []
    for step in reversed(steps):
        ids = [c.get("id") for c in nb.cells]
        cell_id = step.get("cell_id")
        if step["action"] == "insert":
            if cell_id not in ids:
                continue  # deleted since: nothing to undo
            current = nb.cells[ids.index(cell_id)]
            if "".join(current.get("source", "")) != (step.get("source") or ""):
                raise ToolError(f"Cell {cell_id} in {path} was edited after the run inserted it; undo left {path} unchanged.")
            del nb.cells[ids.index(cell_id)]
            requests.append({"op": "delete", "cell_id": cell_id})
        elif step["action"] == "replace":
            if cell_id not in ids:
                raise ToolError(f"Cell {cell_id} in {path} was deleted after the run replaced it; undo left {path} unchanged.")
            current = nb.cells[ids.index(cell_id)]
            if "".join(current.get("source", "")) != (step.get("source") or ""):
                raise ToolError(f"Cell {cell_id} in {path} was edited after the run replaced it; undo left {path} unchanged.")
            nb.cells[ids.index(cell_id)] = restored = nbformat.from_dict(step["previous"])
            requests.append({"op": "replace", "cell": _cell_json(restored)})
            if restored.get("cell_type") == "code" and restored.get("outputs"):
                requests.append({"op": "outputs", "cell_id": cell_id, "outputs": [dict(o) for o in restored["outputs"]],
                                 "execution_count": restored.get("execution_count")})
        else:
            index = min(int(step.get("index", len(nb.cells))), len(nb.cells))
            restored = nbformat.from_dict(step["previous"])
            nb.cells.insert(index, restored)
            requests.append({"op": "insert", "after": nb.cells[index - 1].get("id") if index > 0 else None, "cell": _cell_json(restored)})
            if restored.get("cell_type") == "code" and restored.get("outputs"):
                requests.append({"op": "outputs", "cell_id": restored.get("id"), "outputs": [dict(o) for o in restored["outputs"]],
                                 "execution_count": restored.get("execution_count")})
    return requests


def _edits_by_path(edits: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_path: dict[str, list[dict[str, Any]]] = {}
    for edit in edits:
        if edit.get("action") in ("insert", "replace", "delete"):
            by_path.setdefault(str(edit["path"]), []).append(edit)
    return by_path


def _undo_record(path: str, fingerprint: str, run_id: str, *, live: bool) -> dict[str, Any]:
    return {"path": path, "action": "undo", "cell_id": "", "index": -1, "cell_type": "", "source": None,
            "previous": None, "call_id": "", "live": live, "fingerprint": fingerprint, "undoes": run_id}


def _undone(path: str, steps: list[dict[str, Any]], where: str = "") -> str:
    return f"{path}: {len(steps)} edit{'s' if len(steps) != 1 else ''} undone" + (f" {where}" if where else "")


def undo_run_edits(edits: list[dict[str, Any]], working_dir: Any = None, *, run_id: str = "") -> tuple[str, list[dict[str, Any]]]:
    """Reverts one run's ``notebook_edit`` events (their data, in the order they happened) in the
    saved files.

    Each notebook is changed once, atomically, and only if every edit can be undone as recorded:
    a cell the run inserted or replaced that was changed since is left alone, and nothing is
    written for that notebook (the person's edits win).

    Returns:
        A summary, and the ``notebook_edit`` data of each undo written (action ``undo``).
    """
    ctx = ToolContext("", "edit_notebook", working_dir)
    by_path = _edits_by_path(edits)
    if not by_path:
        return "That run made no notebook edits.", []
    said, written = [], []
    for path, steps in by_path.items():
        doc = nbfile.load(ctx, path, "edit_notebook")
        _undo_steps(doc.nb, steps, path)
        fingerprint = nbfile.save(ctx, doc, "edit_notebook")
        said.append(_undone(path, steps))
        written.append(_undo_record(path, fingerprint, run_id, live=False))
    return "; ".join(said) + ".", written


async def undo_run_edits_async(edits: list[dict[str, Any]], working_dir: Any = None, *, run_id: str = "") -> tuple[str, list[dict[str, Any]]]:
    """``undo_run_edits``, in the open notebook where the kernel's own notebook is open in a front
    end that takes edits (it shows the undo at once; the person's save writes the file), else in
    the saved file. Every edit of a notebook is checked before the first is reverted."""
    ctx = ToolContext("", "edit_notebook", working_dir)
    by_path = _edits_by_path(edits)
    if not by_path:
        return "That run made no notebook edits.", []
    said, written = [], []
    for path, steps in by_path.items():
        live = await _open_live(ctx, path, "edit_notebook")
        if live is None:
            one, records = undo_run_edits(steps, working_dir, run_id=run_id)
            said.append(one.rstrip("."))
            written.extend(records)
            continue
        for request in _undo_steps(live.doc.nb, steps, path):
            op = request.pop("op")
            try:
                await live.notebook.request(op, **request)
            except LiveUnavailable:
                raise ToolError(f"The notebook open in Jupyter closed its connection during the undo; {path} may be partly "
                                "reverted. Reload it or read it again.") from None
        said.append(_undone(path, steps, "in the open notebook (save it to keep the change)"))
        written.append(_undo_record(path, "", run_id, live=True))
    return "; ".join(said) + ".", written


read_notebook = Tool(_read_notebook, name="read_notebook", read_only=True, category="read", permission_key=NotebookPath())
edit_notebook = NotebookEditTool(_edit_notebook, name="edit_notebook", category="edit", concurrency_safe=False, permission_key=NotebookPath())
run_cell = RunCellTool(_run_cell, name="run_cell", category="execute", concurrency_safe=False, permission_key=NotebookPath())
