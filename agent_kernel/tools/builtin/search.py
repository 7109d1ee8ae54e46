"""tools.builtin.search — finding files and text: ``list_files``, ``glob`` and ``grep``.

All three are read-only and confined to the working directory. Walks skip caches and vendored
trees (``.git``, ``node_modules``, ``.venv``, ...) and never follow a symbolic link out of the
working directory; ``grep`` skips binary files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from ...errors import ToolError
from ..tool import Tool, ToolContext
from .limits import MAX_OUTPUT_CHARS, truncate
from .workspace import IGNORED_DIRS, display_path, is_binary, resolve_path, working_dir

__all__ = ["glob", "grep", "list_files"]

MAX_ENTRIES = 500
MAX_MATCHES = 300
MAX_MATCH_LINE = 300
MAX_GREP_FILE_BYTES = 10_000_000


def _walk_files(ctx: ToolContext, base: Path) -> Iterator[Path]:
    """Files under ``base``, in sorted order, skipping ignored folders and links leading outside."""
    root = working_dir(ctx)
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS)
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                continue
            yield path


def _directory(ctx: ToolContext, path: str) -> Path:
    base = resolve_path(ctx, path)
    if not base.exists():
        raise ToolError(f"No such folder: {path!r}. Use list_files on '.' to see what is there.")
    if not base.is_dir():
        raise ToolError(f"{path!r} is a file, not a folder; use read_file to read it.")
    return base


def _list_files(ctx: ToolContext, path: str = ".", recursive: bool = False) -> str:
    """Lists a folder: sub-folders end with '/'. With ``recursive``, lists every file below it.

    Args:
        path: the folder, relative to the working directory.
        recursive: list files in all sub-folders too (caches like .git and node_modules are skipped).
    """
    base = _directory(ctx, path)
    if recursive:
        entries = [display_path(ctx, p) for p in _walk_files(ctx, base)]
    else:
        children = sorted(base.iterdir(), key=lambda p: (not p.is_dir(), p.name))
        entries = [p.name + ("/" if p.is_dir() else "") for p in children]
    if not entries:
        return f"{display_path(ctx, base)} is empty."
    shown = entries[:MAX_ENTRIES]
    text = "\n".join(shown)
    if len(entries) > MAX_ENTRIES:
        text += f"\n[… {len(entries) - MAX_ENTRIES:,} more entries not shown. List a sub-folder or use glob.]"
    return text


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a path glob: ``*`` within one folder, ``**`` across folders, ``?``, ``[abc]``."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _glob(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    """Finds files whose path matches a glob, e.g. '**/*.py' or 'notebooks/*.ipynb'.

    Args:
        pattern: the glob, relative to ``path``; '*' stays within a folder, '**' spans folders.
        path: the folder to search from, relative to the working directory.
    """
    if os.path.isabs(pattern) or ".." in Path(pattern).parts:
        raise ToolError(f"Refused: the pattern {pattern!r} leaves the search folder; write it relative to {path!r}, without '..'.")
    base = _directory(ctx, path)
    regex = _glob_regex(pattern)
    found = [p for p in _walk_files(ctx, base) if regex.match(p.relative_to(base).as_posix())]
    if not found:
        return f"No files match {pattern!r} under {display_path(ctx, base)}."
    lines = [display_path(ctx, p) for p in found[:MAX_ENTRIES]]
    if len(found) > MAX_ENTRIES:
        lines.append(f"[… {len(found) - MAX_ENTRIES:,} more files not shown. Narrow the pattern.]")
    return "\n".join(lines)


def _grep(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None, ignore_case: bool = False) -> str:
    """Searches text files for a regular expression; prints 'path:line: text' for each match.
    Binary files are skipped.

    Args:
        pattern: a Python regular expression.
        path: a file or folder to search, relative to the working directory.
        glob: only search files whose path (relative to ``path``) matches this glob, e.g. '**/*.py'.
        ignore_case: match regardless of case.
    """
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"{pattern!r} is not a valid regular expression ({exc}). Escape special characters like '(' with '\\'.") from None
    target = resolve_path(ctx, path)
    if not target.exists():
        raise ToolError(f"No such file or folder: {path!r}.")
    if target.is_dir():
        only = _glob_regex(glob) if glob else None
        files = [p for p in _walk_files(ctx, target) if only is None or only.match(p.relative_to(target).as_posix())]
    else:
        files = [target]
    matches: list[str] = []
    total = searched = binary = 0
    for file in files:
        try:
            if file.stat().st_size > MAX_GREP_FILE_BYTES or is_binary(file):
                binary += 1
                continue
            with file.open(encoding="utf-8", errors="replace") as f:
                searched += 1
                for number, line in enumerate(f, start=1):
                    if regex.search(line):
                        total += 1
                        if len(matches) < MAX_MATCHES:
                            text = line.rstrip("\n")
                            if len(text) > MAX_MATCH_LINE:
                                text = text[:MAX_MATCH_LINE] + "…"
                            matches.append(f"{display_path(ctx, file)}:{number}: {text}")
        except OSError:
            continue
    skipped = f" ({binary} binary or very large file{'s' if binary != 1 else ''} skipped)" if binary else ""
    if not matches:
        return f"No matches for {pattern!r} in {searched} file{'s' if searched != 1 else ''}{skipped}."
    text = "\n".join(matches)
    if total > len(matches):
        text += f"\n[… {total - len(matches):,} more matches not shown. Narrow the pattern or the path.]"
    if skipped:
        text += f"\n{skipped.strip()}"
    return truncate(text, MAX_OUTPUT_CHARS)


list_files = Tool(_list_files, name="list_files", read_only=True, category="read", permission_key=lambda a: str(a.get("path", ".")))
glob = Tool(_glob, name="glob", read_only=True, category="read", permission_key=lambda a: str(a.get("pattern", "")))
grep = Tool(_grep, name="grep", read_only=True, category="read", permission_key=lambda a: str(a.get("pattern", "")))
