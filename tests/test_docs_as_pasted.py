"""Every code block of the README and docs/ works as a newcomer pastes it.

Each document's blocks run in order as the cells of one notebook, in a real kernel, from a scratch
copy of ``notebooks/`` (where ``notes/todo.md`` is), on the offline model with no provider key,
in the environment the teaching notebooks run in. The Python blocks a script can hold (no magic,
no top-level ``await``) also run together as one script. A block that cannot run here says why in
an HTML comment just above it (``<!-- not run: ... -->``), which shows nowhere on the page.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from .test_notebooks import refresh

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"(?P<note><!-- not run: [^>]*-->\s*)?^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```", re.M | re.S)
_AWAIT = re.compile(r"^(?:async for|await|async with)\b", re.M)


@dataclass(frozen=True)
class Block:
    document: str
    code: str

    @property
    def is_cell(self) -> bool:
        """Python, or a cell of magics (``%%agent``, ``%agent``, ``%load_ext``)."""
        return self.code.lstrip().startswith("%") or not self.code.lstrip().startswith(("$", "make ", "pip "))

    @property
    def is_script(self) -> bool:
        """Plain Python a script can hold: no magic anywhere, no top-level await."""
        return not re.search(r"(^|=\s*)%", self.code, re.M) and not _AWAIT.search(self.code)


def blocks_of(document: Path) -> list[Block]:
    """The runnable blocks of ``document``: Python and magic cells, in order."""
    found = []
    for match in _FENCE.finditer(document.read_text()):
        lang, code = match.group("lang"), match.group("code")
        if match.group("note") or lang not in ("python", ""):
            continue
        if lang == "" and not code.lstrip().startswith("%"):
            continue  # a picture of the layout, a table, output: not code
        found.append(Block(document.name, code))
    return found


RUNNABLE = [doc for doc in DOCUMENTS if blocks_of(doc)]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return refresh.install_kernels(tmp_path_factory.mktemp("prefix"))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A scratch copy of notebooks/ without the notebooks: notes/, data files."""
    for path in (REPO / "notebooks").iterdir():
        if path.is_dir():
            import shutil

            shutil.copytree(path, tmp_path / path.name)
        elif path.suffix != ".ipynb":
            (tmp_path / path.name).write_bytes(path.read_bytes())
    return tmp_path


def test_the_readme_and_docs_have_blocks_to_run() -> None:
    # Else the tests below would pass by running nothing.
    assert {doc.name for doc in RUNNABLE} >= {"README.md", "memory.md", "scale.md"}


@pytest.mark.parametrize("document", RUNNABLE, ids=lambda path: path.name)
def test_each_documents_blocks_run_in_order_in_a_notebook(document: Path, folder: Path, kernels: Path, tmp_path: Path) -> None:
    blocks = blocks_of(document)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(block.code) for block in blocks])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / f"{document.stem}.ipynb"
    nbformat.write(nb, path)
    # In a process of its own, as nbval runs the notebooks: a kernel client leaves zmq sockets
    # for the garbage collector, which this process's warnings filter would turn into errors.
    done = subprocess.run([sys.executable, "-c", _EXECUTE, str(path), str(folder), str(kernels)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{document.name} as a notebook failed:\n{done.stderr[-4000:]}"
    ran = nbformat.read(path, as_version=4)
    errors = [o for cell in ran.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    if document.name == "README.md":
        shown = _text(ran)
        assert "add returned: 5" in shown  # Outside Jupyter: the offline model adds through the tool
        todo = (folder / "notes" / "todo.md").read_text()
        first_item = next(line for line in todo.splitlines() if line.lstrip().startswith(("-", "*", "[")))
        assert first_item.strip("-*[] x").split()[0] in shown  # the to-do list, read by read_file


@pytest.mark.parametrize("document", [doc for doc in RUNNABLE if any(b.is_script for b in blocks_of(doc))], ids=lambda path: path.name)
def test_each_documents_python_blocks_run_as_one_script(document: Path, folder: Path, kernels: Path, tmp_path: Path) -> None:
    script = "\n\n".join(block.code for block in blocks_of(document) if block.is_script)
    env = refresh.notebook_environment(tmpdir=tmp_path / "tmp")
    env["AGENT_KERNEL_MODEL"] = "offline"
    done = subprocess.run([sys.executable, "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{document.name} as a script failed:\n{done.stderr[-3000:]}"
    if document.name == "README.md":
        assert "add returned: 5" in done.stdout


# Runs a notebook in place with the environment and kernels the teaching notebooks use.
_EXECUTE = f"""
import importlib.util, sys
from pathlib import Path
import nbformat
spec = importlib.util.spec_from_file_location("refresh", Path({str(REPO)!r}) / "scripts" / "refresh_notebooks.py")
refresh = importlib.util.module_from_spec(spec); spec.loader.exec_module(refresh)
path, folder, kernels = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
env = refresh.notebook_environment(jupyter_path=kernels, tmpdir=folder / ".tmp")
env["AGENT_KERNEL_MODEL"] = "offline"
nbformat.write(refresh.execute(path, folder, env, kernels), path)
"""


def _text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            data = output.get("data", {})
            parts.append(data.get("text/plain", "") + data.get("text/markdown", "") + data.get("text/html", ""))
    return "\n".join(parts)
