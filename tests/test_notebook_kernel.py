"""The notebook tools in a real kernel (jupyter_client): a %%agent cell edits and runs cells of
the kernel's own notebook, in the user's namespace, while its own cell is busy.

With no front end, the saved file changes. With a front end that speaks the ``agent_kernel.notebook``
comm as the ``agent-kernel-live`` extension does (played here over jupyter_client), the open
notebook changes and the file is left alone; a refused or unconfirmed change is an error the model
reads, never a silent write to the file. The browser tests run the real extension."""

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


# ---- the open notebook: a front end that takes the edits over the comm ------------------------


class FrontEnd:
    """What the ``agent-kernel-live`` front-end extension does, spoken over jupyter_client: it
    answers the kernel's ``agent_kernel.notebook`` comm and keeps its own copy of the notebook."""

    def __init__(self, kc: Any, path: str, notebook: dict[str, Any], *, installed: bool = True,
                 refuse: tuple[str, ...] = (), ignore: tuple[str, ...] = ()) -> None:
        self.kc, self.path, self.nb, self.installed = kc, path, notebook, installed
        self.refuse, self.ignore = refuse, ignore  # requests answered with an error, or never answered
        self.comm_id: str | None = None
        self.ops: list[str] = []

    def handle(self, msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "comm_open" and content.get("target_name") == "agent_kernel.notebook":
            if not self.installed:  # as JupyterLab answers a comm to a target nobody registered
                self.send("comm_close", {"comm_id": content["comm_id"], "data": {}})
                return
            self.comm_id = content["comm_id"]
            self.answer(content["data"])
        elif msg["msg_type"] == "comm_msg" and content.get("comm_id") == self.comm_id:
            self.answer(content["data"])

    def send(self, msg_type: str, content: dict[str, Any]) -> None:
        self.kc.shell_channel.send(self.kc.session.msg(msg_type, content))

    def answer(self, request: dict[str, Any]) -> None:
        self.ops.append(request["op"])
        if request["op"] in self.ignore:
            return
        if request["op"] in self.refuse:
            self.send("comm_msg", {"comm_id": self.comm_id, "data": {"id": request["id"], "ok": False, "error": "the cell is read-only"}})
            return
        try:
            reply = {"id": request["id"], "ok": True, **self.apply(request)}
        except LookupError as exc:
            reply = {"id": request["id"], "ok": False, "error": str(exc)}
        self.send("comm_msg", {"comm_id": self.comm_id, "data": reply})

    def index(self, cell_id: str) -> int:
        ids = [c["id"] for c in self.nb["cells"]]
        if cell_id not in ids:
            raise LookupError(f"No cell with id {cell_id} in the open notebook.")
        return ids.index(cell_id)

    def apply(self, request: dict[str, Any]) -> dict[str, Any]:
        op, cells = request["op"], self.nb["cells"]
        if op == "hello":
            return {"path": self.path}
        if op == "read":
            return {"path": self.path, "notebook": self.nb}
        if op == "insert":
            at = 0 if request["after"] is None else self.index(request["after"]) + 1
            cells.insert(at, {**request["cell"], "outputs": [], "execution_count": None})
            return {"index": at, "cell_ids": [c["id"] for c in cells]}
        elif op == "delete":
            del cells[self.index(request["cell_id"])]
        elif op == "replace":
            cells[self.index(request["cell"]["id"])].update(request["cell"])
        elif op == "outputs":
            cell = cells[self.index(request["cell_id"])]
            cell["outputs"], cell["execution_count"] = request["outputs"], request["execution_count"]
        return {"cell_ids": [c["id"] for c in cells]}


def run_with_front_end(kc: Any, front: FrontEnd, code: str, cell_id: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Runs ``code`` as the front end's cell ``cell_id``, answering the kernel's comm meanwhile."""
    request = kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                                                 "allow_stdin": False, "stop_on_error": True},
                             metadata={"cellId": cell_id} if cell_id else {})
    kc.shell_channel.send(request)
    msg_id, messages = request["header"]["msg_id"], []
    while True:
        msg = kc.get_iopub_msg(timeout=60)
        front.handle(msg)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status":
            if msg["content"]["execution_state"] == "idle":
                break
            continue
        messages.append(msg)
    reply = kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=60)
    return reply["content"], messages


AGENT_CELL = "%%agent -m editor --tools read_notebook edit_notebook run_cell --mode bypass\nadd y"


def test_with_the_notebook_open_the_edit_and_run_go_to_the_open_notebook_and_not_the_file(kernel: Any, tmp_path: Path) -> None:
    saved = (tmp_path / "work.ipynb").read_text()
    front = FrontEnd(kernel, "work.ipynb", nbformat.read(tmp_path / "work.ipynb", as_version=4))
    reply, _ = run_with_front_end(kernel, front, SETUP)
    assert reply["status"] == "ok", reply

    reply, _ = run_with_front_end(kernel, front, AGENT_CELL, "agentcell")

    assert reply["status"] == "ok", reply
    assert (tmp_path / "work.ipynb").read_text() == saved  # the person's save writes the file
    cells = front.nb["cells"]
    assert [c["id"] for c in cells][:2] == ["setx", "agentcell"] and cells[3]["id"] == "end"
    added = cells[2]
    assert added["source"] == "print('doubling')\ny = x * 2\ny" and added["metadata"]["agent_kernel"]["action"] == "insert"
    assert [o["output_type"] for o in added["outputs"]] == ["stream", "execute_result"]
    assert added["outputs"][0]["text"] == "doubling\n" and added["outputs"][1]["data"]["text/plain"] == "40"
    assert isinstance(added["execution_count"], int)
    assert front.ops[:3] == ["hello", "read", "hello"] and "insert" in front.ops and front.ops[-1] == "outputs"

    _, messages = run_with_front_end(kernel, front, "r = editor.requests[-1].messages[-1].tool_results[0].content\n"
                                                    "print(y, 'shows it now' in r, 'Reload' in r)")
    assert stdout(messages).strip() == "40 True False"

    _, messages = run_with_front_end(kernel, front, "%agent undo")
    assert "1 edit undone in the open notebook" in stdout(messages)
    assert [c["id"] for c in front.nb["cells"]] == ["setx", "agentcell", "end"]
    assert (tmp_path / "work.ipynb").read_text() == saved


def test_a_front_end_without_the_extension_gets_the_file_and_the_reload_note(kernel: Any, tmp_path: Path) -> None:
    front = FrontEnd(kernel, "work.ipynb", {}, installed=False)
    reply, _ = run_with_front_end(kernel, front, SETUP)
    assert reply["status"] == "ok", reply

    reply, _ = run_with_front_end(kernel, front, AGENT_CELL, "agentcell")

    assert reply["status"] == "ok", reply
    cells = nbformat.read(tmp_path / "work.ipynb", as_version=4).cells
    assert cells[2].outputs[1].data["text/plain"] == "40"  # the file has the edit and the outputs
    _, messages = run_with_front_end(kernel, front, "r = editor.requests[-1].messages[-1].tool_results[0].content\n"
                                                    "print('Reload Notebook from Disk' in r, 'shows it now' in r)")
    assert stdout(messages).strip() == "True False"
    assert front.comm_id is None  # it never took the comm


def _last_result(kernel: Any, front: FrontEnd) -> str:
    _, messages = run_with_front_end(kernel, front, "print(editor.requests[2].messages[-1].tool_results[0].content)")
    return stdout(messages)


@pytest.mark.parametrize("answer", ["refuse", "ignore"])
def test_an_edit_the_open_notebook_does_not_confirm_is_an_error_and_the_file_is_left_alone(kernel: Any, tmp_path: Path, answer: str) -> None:
    saved = (tmp_path / "work.ipynb").read_text()
    notebook = nbformat.read(tmp_path / "work.ipynb", as_version=4)
    front = FrontEnd(kernel, "work.ipynb", notebook, **{answer: ("insert",)})
    reply, _ = run_with_front_end(kernel, front, SETUP + "\nimport agent_kernel.jupyter._live as live\nlive.REQUEST_TIMEOUT = 0.5")
    assert reply["status"] == "ok", reply

    reply, _ = run_with_front_end(kernel, front, AGENT_CELL, "agentcell")

    assert reply["status"] == "ok", reply
    said = _last_result(kernel, front)  # what the model read for the edit
    if answer == "refuse":
        assert "refused the insert: the cell is read-only" in said
    else:  # it may or may not have happened: never claimed, never done again on the file
        assert "did not confirm the insert" in said and "read the notebook again" in said
    assert "shows it now" not in said
    assert (tmp_path / "work.ipynb").read_text() == saved
    assert [c["id"] for c in front.nb["cells"]] == ["setx", "agentcell", "end"]
