"""_util.spill — where a tool result's whole text is kept when the model is sent less of it.

Two parts send the model less than a tool returned: the cap on one result (``tools``) and
micro-compaction of old results (``context``). Both keep the whole text in one file per call,
``<folder>/<call_id>.txt``, and tell the model its path, so it can read the text back instead of
running the tool again. They share this one naming, so a result capped first and cleared later
points at the same, whole, file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def spill_path(folder: Path, call_id: str) -> Path:
    """The file that keeps the whole result of tool call ``call_id`` in ``folder``."""
    return folder / f"{_UNSAFE_NAME.sub('_', call_id)[:100] or 'output'}.txt"


def shown_path(path: Path) -> str:
    """``path`` as the model is told it: from ``.agent_kernel/`` on when it lies in a session folder
    under the working directory (where the file tools read it, and the same whatever folder the
    work is in), else in full."""
    parts = path.parts
    if ".agent_kernel" in parts:
        return Path(*parts[parts.index(".agent_kernel"):]).as_posix()
    return str(path)


def write_spill(folder: Path, call_id: str, content: str, *, replace: bool = True) -> Path:
    """Writes ``content`` to ``spill_path(folder, call_id)`` (owner-only) and returns the path.

    Args:
        replace: False keeps a file already there: it holds the whole result when the cap wrote
            it, and what is cleared later is only the capped preview.

    Raises:
        OSError: the folder or the file could not be written.
    """
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = spill_path(folder, call_id)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if replace else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        return path
    with open(fd, "w", encoding="utf-8", errors="replace") as f:
        f.write(content)
    return path
