"""tools.builtin — file, search, shell, python, notebook and web tools, named by string in ``tools=[...]``.

Each tool is also an attribute here (``from agent_kernel.tools.builtin import todo_write``),
imported on first use so that naming one does not load the others.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "bash", "edit_file", "edit_notebook", "glob", "grep", "list_files", "make_web_fetch", "memory", "python", "read_file",
    "read_notebook", "run_cell", "todo_write", "web_fetch", "write_file",
]

_HOMES = {
    "read_file": "_files",
    "write_file": "_files",
    "edit_file": "_files",
    "list_files": "_search",
    "glob": "_search",
    "grep": "_search",
    "bash": "_shell",
    "python": "_python",
    "todo_write": "_todo",
    "memory": "_memory",
    "read_notebook": "_notebook",
    "edit_notebook": "_notebook",
    "run_cell": "_notebook",
    "web_fetch": "_web",
    "make_web_fetch": "_web",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
