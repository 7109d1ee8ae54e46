"""jupyter.write_diff — what a ``write_file`` or ``edit_file`` call would change, as a unified diff.

The approval card of those two tools shows this diff rather than their raw JSON arguments, so a
person approves a change they can read. It is drawn for the person only: it is not journaled and
never reaches the model. It fails closed into showing nothing (the card keeps the arguments): a
path outside the working directory (a link that leads out included), anything but a regular
UTF-8 text file under ``MAX_BYTES``, an edit whose text is not found exactly as the tool needs.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Largest file read to draw a diff.
MAX_BYTES = 1_000_000
#: Longest diff sent to the card; past it the diff is cut and says so.
MAX_DIFF_CHARS = 20_000


def write_diff(tool: str, arguments: Mapping[str, Any], working_dir: Path) -> str | None:
    """The unified diff the call would make to its file, or None when it cannot be told exactly."""
    if tool not in ("write_file", "edit_file"):
        return None
    path = arguments.get("path")
    if not isinstance(path, str) or not path:
        return None
    root = working_dir.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        return None
    old = _read(target)
    if old is None:
        return None
    if tool == "write_file":
        content = arguments.get("content")
        if not isinstance(content, str):
            return None
        new = content
    else:
        new_text = _edited(old, arguments)
        if new_text is None:
            return None
        new = new_text
    shown = target.relative_to(root).as_posix()
    diff = "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{shown}" if target.exists() else "/dev/null",
                                        tofile=f"b/{shown}", n=3))
    if not diff:
        return f"(no change to {shown})"
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n… (diff cut at {MAX_DIFF_CHARS:,} characters)\n"
    return diff


def _read(target: Path) -> str | None:
    """The file's text; "" for a file that does not exist yet; None when it cannot be shown."""
    if not target.exists():
        return ""
    if not target.is_file() or target.stat().st_size > MAX_BYTES:
        return None
    try:
        return target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _edited(old: str, arguments: Mapping[str, Any]) -> str | None:
    """The file's text after the edit, as ``edit_file`` makes it; None when it would refuse."""
    old_string, new_string = arguments.get("old_string"), arguments.get("new_string")
    if not isinstance(old_string, str) or not isinstance(new_string, str) or not old_string:
        return None
    count = old.count(old_string)
    replace_all = arguments.get("replace_all") is True
    if count == 0 or (count > 1 and not replace_all):
        return None
    return old.replace(old_string, new_string) if replace_all else old.replace(old_string, new_string, 1)
