"""The notebook tools in a real kernel (jupyter_client): a %%agent cell edits and runs cells of
the kernel's own notebook, in the user's namespace, while its own cell is busy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import KernelManager

from tests.kernel_harness import await_cell, execute, kernel_environment, stdout

SETUP = """
%load_ext agent_kernel
import matplotlib
matplotlib.use("Agg")
from agent_kernel.models.scripted import ScriptedModel, tool_call
x = 20
editor = ScriptedModel([
    tool_call("read_notebook", {}),
    tool_call("edit_notebook", {"action": "insert", "source": "print('doubling')\\ny = x * 2\\ny"}),
    tool_call("run_cell", {"cell": 2}),
    "Added and ran y.",
])
"""


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Any]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 20", id="setx"),
                nbformat.v4.new_code_cell("%%agent -m editor --tools read_notebook edit_notebook run_cell --mode bypass\nadd y", id="agentcell"),
                nbformat.v4.new_markdown_cell("# The end", id="end")]
    nbformat.write(nb, tmp_path / "work.ipynb")
    km = KernelManager(kernel_name="python3")
    # What Jupyter Server gives a notebook's kernel: the notebook's path.
    km.start_kernel(cwd=str(tmp_path), env=kernel_environment(JPY_SESSION_NAME="work.ipynb"))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_an_agent_cell_inserts_below_itself_and_runs_the_cell_in_the_users_namespace(kernel: Any, tmp_path: Path) -> None:
    reply, _ = execute(kernel, SETUP)
    assert reply["status"] == "ok", reply
    # The front end names the cell it runs (JupyterLab and Notebook 7 send metadata.cellId).
    request = kernel.session.msg("execute_request", {
        "code": "%%agent -m editor --tools read_notebook edit_notebook run_cell --mode bypass\nadd y", "silent": False,
        "store_history": True, "user_expressions": {}, "allow_stdin": False, "stop_on_error": True,
    }, metadata={"cellId": "agentcell"})
    kernel.shell_channel.send(request)
    reply, messages = await_cell(kernel, request["header"]["msg_id"], timeout=60)
    assert reply["status"] == "ok", reply
    assert "doubling" not in stdout(messages)  # the cell's prints went into the cell, not the agent's output

    cells = nbformat.read(tmp_path / "work.ipynb", as_version=4).cells
    assert [c.get("id") for c in cells][:2] == ["setx", "agentcell"] and cells[3].id == "end"
    added = cells[2]
    assert added.metadata["agent_kernel"]["action"] == "insert"
    assert [o.output_type for o in added.outputs] == ["stream", "execute_result"]
    assert added.outputs[0].text == "doubling\n" and added.outputs[1].data["text/plain"] == "40"

    reply, messages = execute(kernel, "print(y, editor.requests[-1].messages[-1].tool_results[0].content)")
    printed = stdout(messages)
    assert printed.startswith("40 Ran cell 2")  # y lives in the user's namespace
    assert "Reload Notebook from Disk" in printed  # the open notebook does not show it until reloaded: said, not hidden
