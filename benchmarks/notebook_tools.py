"""Cost of the notebook tools: reading a large notebook, and an insert-and-run round trip.

Goals:
- ``read_notebook`` on a 200-cell notebook with outputs (streams, a DataFrame's text and HTML,
  a traceback, a small PNG every 20 cells): at most 50 ms.
- An insert-and-run round trip in the agent's own notebook (``edit_notebook`` insert, then
  ``run_cell`` of the new cell, in the user's namespace, both saving the file): at most 300 ms
  plus the code's own time. The cell here runs ``x = 1`` (its own time is negligible); the
  figure is the whole round trip.

Both call the tools as the loop does (``Tool.invoke`` with a ``ToolContext``), on a file in a
temporary folder; each figure is the median of the rounds. Kernels started for a file (nbclient)
are not measured: starting one takes seconds, once per session.

Run: python benchmarks/notebook_tools.py
"""

from __future__ import annotations

import asyncio
import base64
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat

from agent_kernel.tools._tool import ToolContext
from agent_kernel.tools.builtin._notebook import edit_notebook, read_notebook, run_cell

READ_GOAL_MS = 50.0
ROUND_TRIP_GOAL_MS = 300.0
ROUNDS = 20


def _png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 3], [3, 1, 2])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=72)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def big_notebook(path: Path, cells: int = 200) -> None:
    import pandas as pd

    frame = pd.DataFrame({"a": range(30), "b": [i * 1.5 for i in range(30)], "c": [f"row {i}" for i in range(30)]})
    png = _png()
    nb = nbformat.v4.new_notebook()
    for i in range(cells):
        cell = nbformat.v4.new_code_cell(f"# step {i}\nvalue_{i} = compute({i})\nprint(value_{i})\nframe.head(30)")
        cell.execution_count = i + 1
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text=f"result {i}\n" * 5),
            nbformat.v4.new_output("execute_result", data={"text/plain": repr(frame), "text/html": frame.to_html()}, execution_count=i + 1),
        ]
        if i % 20 == 0:
            cell.outputs.append(nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}))
        if i % 50 == 7:
            cell.outputs.append(nbformat.v4.new_output("error", ename="ValueError", evalue="bad value",
                                                       traceback=["\x1b[31mValueError\x1b[0m Traceback", "  line 3", "ValueError: bad value"]))
        nb.cells.append(cell)
    nbformat.write(nb, path)


def context(folder: Path, extras: dict[str, Any]) -> ToolContext:
    return ToolContext("bench", "bench", working_dir=folder, extras=extras)


async def measure_read(folder: Path) -> float:
    extras: dict[str, Any] = {}
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        result = await read_notebook.invoke(read_notebook.validate({"path": "big.ipynb"}), context(folder, extras))
        times.append(time.perf_counter() - started)
    text = getattr(result, "content", result)
    assert "[cell 199]" in text, "the nearest cells must be shown"
    return statistics.median(times) * 1000


async def measure_round_trip(folder: Path) -> float:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Work"), nbformat.v4.new_code_cell("import math")]
    nbformat.write(nb, folder / "work.ipynb")
    extras: dict[str, Any] = {"namespace": {}, "notebook_path": "work.ipynb"}
    await read_notebook.invoke(read_notebook.validate({}), context(folder, extras))
    times = []
    for i in range(ROUNDS):
        started = time.perf_counter()
        said = await edit_notebook.invoke(edit_notebook.validate({"action": "insert", "source": f"x_{i} = 1"}), context(folder, extras))
        cell_id = str(said).split("(id ")[1].split(")")[0]
        ran = await run_cell.invoke(run_cell.validate({"cell": cell_id}), context(folder, extras))
        times.append(time.perf_counter() - started)
        assert not getattr(ran, "is_error", False), ran
    return statistics.median(times) * 1000


async def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="notebook-bench-"))
    big_notebook(folder / "big.ipynb")
    size = (folder / "big.ipynb").stat().st_size
    read_ms = await measure_read(folder)
    trip_ms = await measure_round_trip(folder)
    print(f"read_notebook, 200 cells with outputs ({size / 1e6:.1f} MB): {read_ms:.1f} ms "
          f"(goal {READ_GOAL_MS:.0f} ms, ratio {read_ms / READ_GOAL_MS:.2f})")
    print(f"insert + run round trip, in process:             {trip_ms:.1f} ms "
          f"(goal {ROUND_TRIP_GOAL_MS:.0f} ms, ratio {trip_ms / ROUND_TRIP_GOAL_MS:.2f})")


if __name__ == "__main__":
    asyncio.run(main())
