"""tools.builtin.workspace — the working directory file tools are confined to, and paths inside it.

Every path a built-in file tool touches is resolved here. A path that leaves the working directory
(``..``, an absolute path elsewhere, or a symbolic link pointing out) is refused with a message
the model can act on, so an agent cannot read ``~/.ssh`` or overwrite files outside the project.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import ToolError
from ..tool import ToolContext

__all__ = ["IGNORED_DIRS", "display_path", "is_binary", "resolve_path", "working_dir"]

# Directories the search tools skip: caches and vendored trees that drown real results.
IGNORED_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", ".tox"}
)


def working_dir(ctx: ToolContext | None) -> Path:
    """The run's working directory (``ctx.working_dir``, else the process's current directory), resolved."""
    root = ctx.working_dir if ctx is not None and ctx.working_dir is not None else os.getcwd()
    return Path(root).resolve()


def resolve_path(ctx: ToolContext | None, path: str) -> Path:
    """The absolute, link-free path of ``path`` (relative to the working directory).

    Raises:
        ToolError: if it is empty or leads outside the working directory.
    """
    root = working_dir(ctx)
    if not path or not str(path).strip():
        raise ToolError("The path is empty; give a path relative to the working directory, e.g. 'notes.md'.")
    given = Path(os.path.expanduser(str(path).strip()))
    candidate = given if given.is_absolute() else root / given
    # Lexical check first (.. and absolute paths), so the message can say which it was.
    lexical = Path(os.path.normpath(candidate))
    if not lexical.is_relative_to(root):
        kind = "an absolute path outside" if given.is_absolute() else "outside"
        raise ToolError(
            f"Refused: {path!r} is {kind} the working directory {root}. File tools only reach files "
            f"under it; use a path relative to {root}."
        )
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        raise ToolError(
            f"Refused: {path!r} goes through a symbolic link to {resolved}, outside the working directory "
            f"{root}. File tools do not follow links out of it."
        )
    return resolved


def display_path(ctx: ToolContext | None, path: Path) -> str:
    """``path`` relative to the working directory, as the model should write it."""
    root = working_dir(ctx)
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return "." if str(rel) == "." else rel.as_posix()


def is_binary(path: Path, sample: int = 8192) -> bool:
    """True when the file's first bytes contain a NUL byte (how git and grep tell binary files)."""
    try:
        with path.open("rb") as f:
            return b"\0" in f.read(sample)
    except OSError:
        return False
