"""tools.builtin.workspace — the working directory the built-in file tools are confined to.

The built-in tools reach files only through ``tools.paths.Workspace``: one resolution (every
spelling of a file gives one canonical path, which permission rules match), confinement (``..``,
absolute paths elsewhere and links pointing out are refused with a message the model can act on),
and race-safe opening (a descriptor walk that follows no link). This module adapts it to a
``ToolContext`` and adds the re-check of the permission rules on what a tool really opens.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from agent_kernel.errors import ToolError
from agent_kernel.guard._paths import PathKey, Workspace, path_rules
from agent_kernel.tools._tool import ToolContext

# Directories the search tools skip: caches and vendored trees that drown real results.
IGNORED_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", ".tox"}
)


# The family each built-in tool's opens are re-checked as (any other tool: its own name only). A
# notebook edit is a write, and so is a cell run, which stores the cell's outputs in the notebook.
_FAMILY = {
    "read_file": "read",
    "grep": "read",
    "read_notebook": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "edit_notebook": "edit",
    "run_cell": "edit",
}


def workspace(ctx: ToolContext | None) -> Workspace:
    """The run's workspace (``ctx.working_dir``, else the process's current directory)."""
    return Workspace(ctx.working_dir if ctx is not None and ctx.working_dir is not None else None)


def working_dir(ctx: ToolContext | None) -> Path:
    """The run's working directory (``ctx.working_dir``, else the process's current directory), resolved."""
    return workspace(ctx).root


def resolve_path(ctx: ToolContext | None, path: str) -> Path:
    """The absolute, link-free path of ``path`` (relative to the working directory).

    Raises:
        ToolError: if it is empty or leads outside the working directory.
    """
    return workspace(ctx).resolve(path).path


def display_path(ctx: ToolContext | None, path: Path) -> str:
    """``path`` relative to the working directory, as the model should write it."""
    return workspace(ctx).display(path)


def guard(ctx: ToolContext | None, tool_name: str, family: str | None = None) -> Callable[[str], None] | None:
    """A check of the run's deny rules on the canonical path a tool is about to open.

    The permission gate judged the path as resolved when the call was made; a link inside the
    workspace may have been re-pointed since. Re-checking the deny rules on the path actually
    opened closes that gap. The rules of the tool's family bind it (``guard._families``): every
    tool that reads honours ``read_file`` rules, every tool that writes ``write_file`` and
    ``edit_file`` rules, and a writer the ``read_file`` ones too (``edit_file``'s "0 matches"
    answer would let a model probe a file it may not read).
    """
    rules = path_rules(ctx)
    if rules is None:
        return None
    root = str(workspace(ctx).root)
    family = family or _FAMILY.get(tool_name)

    def check(rel: str) -> None:
        rule = rules.refuses(tool_name, PathKey.of(rel, root), family=family)
        if rule is not None:
            raise ToolError(
                f"Permission denied: the rule deny {rule!r} forbids {tool_name} on {rel!r}. "
                "Do not retry this call; use another approach or ask the user."
            )

    return check


def withheld(ctx: ToolContext | None) -> Callable[[str], bool]:
    """A test: True for a canonical path the search tools must leave out of their results.

    A path is withheld when a deny or ask rule naming ``read_file`` matches it: reading it needs a
    ``read_file`` call, which the rules judge, so grep, glob and list_files must not show it.
    """
    rules = path_rules(ctx)
    if rules is None:
        return lambda rel: False
    root = str(workspace(ctx).root)
    return lambda rel: rules.refuses("read_file", PathKey.of(rel, root), asking=True, family="read") is not None


def is_binary(path: Path | int, sample: int = 8192) -> bool:
    """True when the file's first bytes contain a NUL byte (how git and grep tell binary files).

    ``path`` may be an open descriptor; it is read with ``pread`` and its offset left alone.
    """
    try:
        if isinstance(path, int):
            return b"\0" in os.pread(path, sample, 0)
        with path.open("rb") as f:
            return b"\0" in f.read(sample)
    except OSError:
        return False

