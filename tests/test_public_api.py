"""The public surface: __all__ is sorted, complete and importable, and the core imports no Jupyter."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

import agent_kernel
from agent_kernel._moved import MOVED


def test_all_is_sorted_and_every_name_exists() -> None:
    assert agent_kernel.__all__ == sorted(agent_kernel.__all__)
    for name in agent_kernel.__all__:
        assert getattr(agent_kernel, name) is not None


def test_public_names_are_exactly_what_all_lists() -> None:
    public = {n for n in vars(agent_kernel) if not n.startswith("_") and not isinstance(getattr(agent_kernel, n), type(sys))}
    public -= {"annotations", "Any"}
    assert public == set(agent_kernel.__all__)


ROOT = Path(__file__).resolve().parents[1]
_IMPORT = re.compile(r"^\s*((?:from agent_kernel[\w.]* import [\w, ]+)|(?:import agent_kernel[\w.]*))", re.M)
_DOTTED = re.compile(r"`(agent_kernel(?:\.\w+)+)")


def _documents() -> dict[str, str]:
    """README, docs/ and the notebooks' code cells, by name."""
    texts = {"README.md": (ROOT / "README.md").read_text()}
    texts |= {f"docs/{p.name}": p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        texts[f"notebooks/{path.name}"] = "\n".join(c.source for c in cells if c.cell_type == "code")
    return texts


def _documented_imports() -> list[tuple[str, str]]:
    found = {(name, m.group(1).strip()) for name, text in _documents().items() for m in _IMPORT.finditer(text)}
    return sorted(found)


def _documented_paths() -> list[tuple[str, str]]:
    return sorted({(name, m.group(1)) for name, text in _documents().items() for m in _DOTTED.finditer(text)})


def test_the_documents_show_imports_to_check() -> None:
    # The collectors below must find something, or the next two tests check nothing.
    assert len(_documented_imports()) > 20 and len(_documented_paths()) > 3


@pytest.mark.parametrize(("document", "statement"), _documented_imports())
def test_every_import_the_documents_show_works_without_a_warning(document: str, statement: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", "unclosed", ResourceWarning)  # an earlier test's agent, collected meanwhile
        exec(statement, {})


@pytest.mark.parametrize(("document", "dotted"), _documented_paths())
def test_every_dotted_name_the_documents_show_resolves(document: str, dotted: str) -> None:
    parts = dotted.split(".")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", "unclosed", ResourceWarning)  # an earlier test's agent, collected meanwhile
        target = importlib.import_module(parts[0])
        for part in parts[1:]:
            # An attribute first (agent_kernel.journal.sql is the function), else a submodule.
            target = getattr(target, part) if hasattr(target, part) else importlib.import_module(f"{target.__name__}.{part}")


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_path_still_imports_for_one_release_and_names_the_new_one(old: str) -> None:
    sys.modules.pop(f"agent_kernel.{old}", None)
    with pytest.warns(DeprecationWarning, match=rf"agent_kernel\.{re.escape(old)} moved to agent_kernel\.{re.escape(MOVED[old])}"):
        module = importlib.import_module(f"agent_kernel.{old}")
    assert module is importlib.import_module(f"agent_kernel.{MOVED[old]}")


def test_python_dash_m_on_the_old_install_path_still_runs_it() -> None:
    done = subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-m", "agent_kernel.install", "--help"], capture_output=True, text=True, check=True)
    assert "--sys-prefix" in done.stdout and "agent_kernel.jupyter.install" in done.stderr


def test_the_root_holds_only_the_vocabulary_the_parts_and_private_modules() -> None:
    package = ROOT / "agent_kernel"
    modules = {p.stem for p in package.glob("*.py")} - {"__init__"}
    assert {m for m in modules if not m.startswith("_")} == {"errors", "messages"}
    parts = {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert parts == {"_util", "agent", "context", "events", "guard", "journal", "jupyter", "mcp", "memory", "models", "runtime", "team", "tools"}


def test_importing_the_core_loads_no_jupyter_or_sdk() -> None:
    code = (
        "import sys, agent_kernel; from agent_kernel import Agent;"
        "bad = [m for m in ('IPython', 'ipykernel', 'ipywidgets', 'anywidget', 'anthropic', 'openai') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_importing_an_old_path_leaves_the_packages_own_names_alone() -> None:
    # agent_kernel.journal.sql was a module beside the sql function; importing the old module path
    # must not put the module where the function is.
    import agent_kernel.journal
    import agent_kernel.tools
    import agent_kernel.tools.builtin

    for old in ("journal.sql", "journal.replay", "tools.tool", "tools.builtin.memory"):
        sys.modules.pop(f"agent_kernel.{old}", None)
        with pytest.warns(DeprecationWarning):
            importlib.import_module(f"agent_kernel.{old}")
    assert callable(agent_kernel.journal.sql) and callable(agent_kernel.journal.replay)
    assert callable(agent_kernel.tools.tool) and type(agent_kernel.tools.builtin.memory).__name__ == "MemoryTool"
