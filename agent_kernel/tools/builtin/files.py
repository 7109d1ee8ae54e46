"""tools.builtin.files — the file tools: ``read_file``, ``write_file`` and ``edit_file``.

All three are confined to the run's working directory (see ``workspace``). ``write_file`` and
``edit_file`` have ``category="edit"``, so the ``accept_edits`` permission mode lets them run
without asking; their permission key is the path, so a rule like ``write_file(notebooks/*)`` works.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import ToolError
from ..tool import Tool, ToolContext
from .limits import MAX_OUTPUT_CHARS, truncate
from .workspace import display_path, is_binary, resolve_path

__all__ = ["edit_file", "read_file", "write_file"]

MAX_LINE_CHARS = 2_000
DEFAULT_LINES = 2_000


def _path_key(arguments: dict[str, Any]) -> str:
    path = str(arguments.get("path", ""))
    return os.path.normpath(path) if path else path


def _existing_text_file(ctx: ToolContext, path: str) -> Path:
    target = resolve_path(ctx, path)
    if not target.exists():
        raise ToolError(f"No such file: {path!r} (in {display_path(ctx, target.parent)}). Use list_files or glob to find it.")
    if target.is_dir():
        raise ToolError(f"{path!r} is a directory, not a file; use list_files to see what it contains.")
    if is_binary(target):
        raise ToolError(f"{path!r} is a binary file ({target.stat().st_size:,} bytes); the file tools handle text only.")
    return target


def _read_file(path: str, ctx: ToolContext, offset: int = 1, limit: int = DEFAULT_LINES) -> str:
    """Reads a text file, numbering its lines like cat -n.

    Args:
        path: the file, relative to the working directory.
        offset: the first line to show (1-based).
        limit: how many lines to show at most.
    """
    if offset < 1:
        raise ToolError(f"offset is the first line to show, counting from 1; got {offset}.")
    if limit < 1:
        raise ToolError(f"limit is how many lines to show, at least 1; got {limit}.")
    target = _existing_text_file(ctx, path)
    shown: list[str] = []
    last = seen = 0
    more = False
    with target.open(encoding="utf-8", errors="replace", newline=None) as f:
        for number, line in enumerate(f, start=1):
            seen = number
            if number < offset:
                continue
            if number >= offset + limit:
                more = True
                break
            line = line.rstrip("\n")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + f"… [line cut: {len(line):,} characters]"
            shown.append(f"{number:>6}\t{line}")
            last = number
    if not shown:
        if offset == 1:
            return f"({display_path(ctx, target)} is empty.)"
        raise ToolError(f"{path!r} has only {seen} lines; offset {offset} is past the end.")
    text = "\n".join(shown)
    if more:
        text += f"\n(Showing lines {offset}-{last}; more follow. Call read_file with offset={last + 1} to read on.)"
    return truncate(text, MAX_OUTPUT_CHARS, hint="Use offset and limit to read a smaller range.")


def _write_file(path: str, content: str, ctx: ToolContext) -> str:
    """Writes ``content`` to a file, creating it (and its folders) or replacing what was there.

    Args:
        path: the file, relative to the working directory.
        content: the complete new text of the file.
    """
    target = resolve_path(ctx, path)
    if target.is_dir():
        raise ToolError(f"{path!r} is a directory; give a file path.")
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8", errors="surrogateescape")
    target.write_bytes(data)
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    state = "replaced the previous contents" if existed else "new file"
    return f"Wrote {lines} lines ({len(data):,} bytes) to {display_path(ctx, target)} ({state})."


def _edit_file(path: str, old_string: str, new_string: str, ctx: ToolContext, replace_all: bool = False) -> str:
    """Replaces an exact piece of text in a file. ``old_string`` must occur exactly once unless
    ``replace_all`` is set; include enough surrounding lines to make it unique.

    Args:
        path: the file, relative to the working directory.
        old_string: the exact text to replace, whitespace included.
        new_string: the text to put in its place.
        replace_all: replace every occurrence instead of requiring exactly one.
    """
    if old_string == "":
        raise ToolError("old_string is empty; to create or overwrite a whole file use write_file.")
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same; there is nothing to change.")
    target = _existing_text_file(ctx, path)
    # surrogateescape keeps undecodable bytes exactly as they were when the file is written back.
    text = target.read_bytes().decode("utf-8", errors="surrogateescape")
    count = text.count(old_string)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {path!r} (0 matches). Read the file and copy the text exactly, "
            "including indentation and line breaks."
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {path!r}; it must match exactly once. Include more surrounding "
            "lines to make it unique, or set replace_all to replace every occurrence."
        )
    line = text[: text.index(old_string)].count("\n") + 1
    updated = text.replace(old_string, new_string) if replace_all else text.replace(old_string, new_string, 1)
    target.write_bytes(updated.encode("utf-8", errors="surrogateescape"))
    what = f"{count} occurrences" if count > 1 else f"1 occurrence at line {line}"
    return f"Edited {display_path(ctx, target)}: replaced {what}."


read_file = Tool(_read_file, name="read_file", read_only=True, category="read", permission_key=_path_key)
write_file = Tool(_write_file, name="write_file", category="edit", permission_key=_path_key)
edit_file = Tool(_edit_file, name="edit_file", category="edit", permission_key=_path_key)
