"""models.offline_notebook — the offline model's notebook moves: read, add a plot, run it, describe it.

With the notebook tools (``read_notebook``, ``edit_notebook``, ``run_cell``) the offline model
follows one short, deterministic plan, so a notebook with no key shows the agent working in it:

1. A prompt about the notebook reads it (``read_notebook``; the ``.ipynb`` the prompt names, else
   the current notebook).
2. When the prompt names a CSV file and asks for a plot, it inserts a code cell that loads the
   CSV with pandas and plots the column the prompt names (the first numeric one otherwise)
   against the first column, with a title and axis labels.
3. It runs that cell (``run_cell``, by the id the insert reported).
4. It answers from the run: the figure's title and axes, read from the image's metadata (the
   ``alt`` line the tools give each image), or the error the cell raised.

``%agent fix`` prompts get an answer too: the error restated, the names the cell uses that are
not defined, and for a missing key the closest key its data holds.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any, Protocol

from agent_kernel.models._base import ToolSpec

_STAND_IN = "(offline model)"
_CSV = re.compile(r"(?<![\w/.-])([\w./-]+\.csv)\b")
_NOTEBOOK = re.compile(r"(?<![\w/.-])([\w./-]+\.ipynb)\b")
_PLOT = re.compile(r"\b(?:plot|chart|graph|draw)\w*\s+(?:the\s+|a\s+|its\s+)?(?:column\s+)?[\"'`]?([A-Za-z_][\w-]*)", re.I)
_NOT_COLUMNS = frozenset("a an the it them column columns data chart plot graph of".split())
_INSERTED = re.compile(r"Inserted code cell \d+ \(id ([\w-]+)\)")
_FIGURE = re.compile(r"figure '([^']*)'(?:: x '([^']*)')?(?:, y '([^']*)')?")
_FIX = re.compile(r"^The last notebook cell failed with (.+?)\. ", re.S)


class Step(Protocol):
    """A tool call made for the prompt and its result (the offline model's ``_Step``)."""

    @property
    def name(self) -> str: ...
    @property
    def args(self) -> dict[str, Any]: ...
    @property
    def result(self) -> str | None: ...
    @property
    def is_error(self) -> bool: ...
    @property
    def images(self) -> tuple[str, ...]: ...


def _tool(tools: Sequence[ToolSpec], name: str) -> ToolSpec | None:
    return next((t for t in tools if t.name == name), None)


def _wants_notebook(prompt: str) -> bool:
    lowered = prompt.lower()
    return bool(_NOTEBOOK.search(prompt)) or "notebook" in lowered or " cell" in lowered or bool(_CSV.search(prompt) and _PLOT.search(prompt))


def notebook_first(prompt: str, tools: Sequence[ToolSpec]) -> tuple[ToolSpec, dict[str, Any], str] | None:
    """The first call for a prompt about the notebook (``read_notebook``), or None."""
    reader = _tool(tools, "read_notebook")
    if reader is None or not _wants_notebook(prompt) or _FIX.match(prompt):
        return None
    named = _NOTEBOOK.search(prompt)
    args = {"path": named.group(1)} if named else {}
    where = named.group(1) if named else "the notebook"
    return reader, args, f"The prompt is about {where}, so I read it first."


def plot_source(csv: str, column: str | None) -> str:
    """The cell that loads ``csv`` with pandas and plots ``column`` (or the first numeric one)."""
    pick = f"{column!r} if {column!r} in df.columns else " if column else ""
    return (
        "import matplotlib.pyplot as plt\nimport pandas as pd\n\n"
        f"df = pd.read_csv({csv!r})\n"
        f"column = {pick}df.select_dtypes('number').columns[0]\n"
        "ax = df.plot(x=df.columns[0], y=column, legend=False)\n"
        "ax.set_title(f'{column} by {df.columns[0]}')\n"
        "ax.set_xlabel(df.columns[0])\n"
        "ax.set_ylabel(column)\n"
        "df.describe()"
    )


def _column(prompt: str) -> str | None:
    for match in _PLOT.finditer(prompt):
        word = match.group(1)
        if word.lower() not in _NOT_COLUMNS and not word.lower().endswith("csv"):
            return word
    return None


def notebook_next(prompt: str, steps: Sequence[Step], tools: Sequence[ToolSpec]) -> tuple[ToolSpec, dict[str, Any], str] | None:
    """The next call of the notebook plan (insert a plot cell, then run it), or None."""
    last = steps[-1]
    if last.result is None or last.is_error:
        return None
    path = {"path": last.args["path"]} if last.args.get("path") else {}
    csv = _CSV.search(prompt)
    editor, runner = _tool(tools, "edit_notebook"), _tool(tools, "run_cell")
    if last.name == "read_notebook" and csv and _PLOT.search(prompt) and editor is not None:
        column = _column(prompt)
        args = {"action": "insert", "source": plot_source(csv.group(1), column), **path}
        what = f"the {column} column" if column else "its first numeric column"
        return editor, args, f"I add a cell that loads {csv.group(1)} with pandas and plots {what}."
    inserted = _INSERTED.search(last.result)
    if last.name == "edit_notebook" and inserted and runner is not None:
        return runner, {"cell": inserted.group(1), **path}, f"I run the new cell ({inserted.group(1)})."
    return None


def notebook_answer(steps: Sequence[Step]) -> str | None:
    """The answer after the notebook plan's last step, or None when the last step is another tool's."""
    last = steps[-1]
    if last.name != "run_cell" or last.result is None:
        return None
    if last.is_error:
        error = next((line for line in reversed(last.result.splitlines()) if re.match(r"^\w+(Error|Exception)\b", line)), "")
        return f"{_STAND_IN} The cell failed{': ' + error if error else ''}. Its traceback is in the notebook; %agent fix asks about it."
    figures = [m for m in (_FIGURE.search(alt) for alt in last.images) if m]
    if not figures:
        figures = [m for m in _FIGURE.finditer(last.result)]
    if not figures:
        return f"{_STAND_IN} The cell ran; it drew no figure. It showed:\n{last.result[:300]}"
    lines = []
    for figure in figures:
        title, x, y = figure.group(1), figure.group(2), figure.group(3)
        axes = " and ".join(p for p in (f"x axis {x!r}" if x else "", f"y axis {y!r}" if y else "") if p)
        lines.append(f"a figure titled {title!r}" + (f" with {axes}" if axes else ""))
    return (f"{_STAND_IN} I added a cell to the notebook and ran it. It drew {'; '.join(lines)} "
            "(read from the image's metadata: I cannot see pixels). The cell is marked as mine in its metadata; "
            "%agent undo removes it.")


def fix_answer(prompt: str) -> str | None:
    """The offline answer to a ``%agent fix`` prompt: the error, undefined names, a key's closest match."""
    failed = _FIX.match(prompt)
    if failed is None:
        return None
    error = failed.group(1)
    names = dict(re.findall(r"^- (\w+): (.*)$", prompt, re.M))
    undefined = [n for n, about in names.items() if about == "not defined"]
    lines = [f"{_STAND_IN} The cell raised {error}."]
    if undefined:
        lines.append(f"These names are not defined yet: {', '.join(undefined)}; run the cells that define them first.")
    key = re.match(r"KeyError: '([^']+)'", error)
    if key:
        words = set(re.findall(r"[A-Za-z_][\w-]*", " ".join(about for about in names.values())))
        close = difflib.get_close_matches(key.group(1), sorted(words), n=1)
        if close:
            lines.append(f"There is no key {key.group(1)!r}; the data holds {close[0]!r}, which is probably what the cell meant.")
    return " ".join(lines)
