"""tools.builtin.files — the file tools: ``read_file``, ``write_file`` and ``edit_file``.

All three are confined to the run's working directory and open files only through
``tools.paths.Workspace`` (a descriptor walk that follows no swapped link; FIFOs, sockets and
devices refused). ``write_file`` and ``edit_file`` have ``category="edit"``, so the
``accept_edits`` permission mode lets them run without asking. Their permission key is the
canonical path, so a rule like ``write_file(notebooks/*)`` or ``read_file(.env)`` holds for every
spelling of the path; the deny rules are checked again on the file actually opened.
"""

from __future__ import annotations

import io
import os

from agent_kernel.errors import ToolError
from agent_kernel.guard._paths import FileIdentity, Resolved, path_key
from agent_kernel.tools._tool import Tool, ToolContext
from agent_kernel.tools.builtin._limits import MAX_OUTPUT_CHARS, truncate
from agent_kernel.tools.builtin._workspace import guard, is_binary, workspace

MAX_LINE_CHARS = 2_000
DEFAULT_LINES = 2_000


def _open_text_file(ctx: ToolContext, path: str, tool_name: str, expect: FileIdentity | None = None) -> tuple[int, Resolved]:
    """An open descriptor on an existing text file, with its canonical path (the caller closes it)."""
    ws = workspace(ctx)
    try:
        fd, resolved, _ = ws.open(path, guard=guard(ctx, tool_name), expect=expect)
    except ToolError as exc:
        if str(exc).startswith("No such file"):
            parent = os.path.dirname(ws.canonical(path)) or "."
            raise ToolError(f"No such file: {path!r} (in {parent}). Use list_files or glob to find it.") from None
        raise
    if is_binary(fd):
        size = os.fstat(fd).st_size
        os.close(fd)
        raise ToolError(f"{path!r} is a binary file ({size:,} bytes); the file tools handle text only.")
    return fd, resolved


def _read_all(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _encoded(text: str) -> bytes:
    """``text`` as UTF-8; surrogateescape gives back undecodable bytes a file was read with."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        raise ToolError("the text holds a lone surrogate (an invalid \\ud800-style escape), which no UTF-8 file can hold; "
                        "write the character itself.") from None


def _replace_contents(fd: int, data: bytes) -> None:
    """Writes ``data`` as the file's whole contents through an open descriptor, then closes it."""
    try:
        os.ftruncate(fd, 0)
        view = memoryview(data)
        offset = 0
        while offset < len(view):
            offset += os.pwrite(fd, view[offset:], offset)
    finally:
        os.close(fd)


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
    fd, target = _open_text_file(ctx, path, "read_file")
    shown: list[str] = []
    last = seen = 0
    more = False
    with io.TextIOWrapper(os.fdopen(fd, "rb"), encoding="utf-8", errors="replace", newline=None) as f:
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
            return f"({target.rel} is empty.)"
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
    data = _encoded(content)  # before the file is opened: a failure leaves no file and no descriptor
    try:
        # An approved write opens the file its card showed, or none (a link re-pointed meanwhile).
        fd, target, created = workspace(ctx).open(path, write=True, guard=guard(ctx, "write_file"), expect=ctx.approved_file)
    except ToolError as exc:
        if "is a directory" in str(exc):
            raise ToolError(f"{path!r} is a directory; give a file path.") from None
        raise
    _replace_contents(fd, data)
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    state = "new file" if created else "replaced the previous contents"
    return f"Wrote {lines} lines ({len(data):,} bytes) to {target.rel} ({state})."


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
    fd, target = _open_text_file(ctx, path, "edit_file", expect=ctx.approved_file)
    # surrogateescape keeps undecodable bytes exactly as they were when the file is written back.
    text = _read_all(fd).decode("utf-8", errors="surrogateescape")
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
    data = _encoded(updated)
    # Written through a fresh race-safe open of the same canonical path (the read one was read-only).
    fd, _, _ = workspace(ctx).open(target.rel, write=True, guard=guard(ctx, "edit_file"), expect=ctx.approved_file)
    _replace_contents(fd, data)
    what = f"{count} occurrences" if count > 1 else f"1 occurrence at line {line}"
    return f"Edited {target.rel}: replaced {what}."


read_file = Tool(_read_file, name="read_file", read_only=True, category="read", permission_key=path_key("path"))
write_file = Tool(_write_file, name="write_file", category="edit", permission_key=path_key("path"))
edit_file = Tool(_edit_file, name="edit_file", category="edit", permission_key=path_key("path"))
