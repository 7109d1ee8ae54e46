"""tools.builtin.search — finding files and text: ``list_files``, ``glob`` and ``grep``.

All three are read-only and confined to the working directory. Walks go by directory
descriptors (``Workspace.walk``), skip caches and vendored trees (``.git``, ``node_modules``,
``.venv``, ...) and never follow a symbolic link out of the working directory; ``grep`` opens each
file with the same race-safe open as ``read_file`` and skips binary files. A file a ``read_file``
deny or ask rule covers (by its name or by where a link leads) is withheld from every result,
with a count saying so: reading it takes a ``read_file`` call the rules judge.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import regex as bounded_re

from agent_kernel.errors import ToolError
from agent_kernel.guard._paths import Workspace, path_key
from agent_kernel.tools._tool import Tool, ToolContext
from agent_kernel.tools.builtin._limits import MAX_OUTPUT_CHARS, truncate
from agent_kernel.tools.builtin._workspace import IGNORED_DIRS, guard, is_binary, withheld, workspace

MAX_ENTRIES = 500
MAX_MATCHES = 300
MAX_MATCH_LINE = 300
MAX_GREP_FILE_BYTES = 10_000_000
#: Seconds of matching one glob or grep call may spend. A model's pattern is hostile input: a
#: nested quantifier such as '(a+)+$' backtracks for ever, and Python's re would hold the
#: interpreter lock all that time, so matching uses the regex module, which takes a timeout and
#: releases the lock while it works.
MATCH_SECONDS = 10.0


class _Listing:
    """What a search may show: walks by descriptors, hides links out and withheld paths, counts them."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ws: Workspace = workspace(ctx)
        self._withheld: Callable[[str], bool] = withheld(ctx)
        self.hidden = 0

    def visible(self, rel: str, link: bool | None = None) -> bool:
        """Whether ``rel`` may appear: inside the workspace, and neither it nor its target withheld.

        ``rel`` is a name in a folder reached without links, so only a link (``link``: known to
        be one or not, None: look) has another name.
        """
        if link is None:
            link = os.path.islink(self.ws.root / rel)
        target = self.ws.canonical(rel) if link else rel
        if os.path.isabs(target):  # a link leading out of the workspace: never shown
            return False
        if self._withheld(rel) or (target != rel and self._withheld(target)):
            self.hidden += 1
            return False
        return True

    def files(self, base: str) -> Iterator[str]:
        """Files under the folder ``base`` (canonical), sorted, skipping ignored and withheld ones."""
        for rel, _, _, _ in self.entries(base):
            yield rel

    def entries(self, base: str) -> Iterator[tuple[str, int | None, str, bool]]:
        """Like ``files``, with the descriptor of each file's folder (valid until the next one), its
        name, and whether it is a link."""
        for folder, dirs, files, dir_fd in self.ws.walk(base):
            kept = []
            for d in sorted(dirs):
                if d in IGNORED_DIRS:
                    continue
                if self._withheld(_join(folder, d)):
                    self.hidden += 1
                    continue
                kept.append(d)
            dirs[:] = kept
            for name in sorted(files):
                rel = _join(folder, name)
                link = os.path.islink(self.ws.root / rel)
                if self.visible(rel, link):
                    yield rel, dir_fd, name, link

    def note(self) -> str:
        """A line saying how many entries permission rules withheld, or ''."""
        if not self.hidden:
            return ""
        s = "y" if self.hidden == 1 else "ies"
        return f"({self.hidden} entr{s} withheld by permission rules: reading them needs read_file, which the rules refuse.)"


def _join(folder: str, name: str) -> str:
    return name if folder == "." else posixpath.join(folder, name)


def _directory(listing: _Listing, path: str) -> str:
    """The canonical folder ``path``, or a ToolError saying what it is instead."""
    target = listing.ws.resolve(path)
    if not target.path.exists():
        raise ToolError(f"No such folder: {path!r}. Use list_files on '.' to see what is there.")
    if not target.path.is_dir():
        raise ToolError(f"{path!r} is a file, not a folder; use read_file to read it.")
    if target.rel != "." and listing._withheld(target.rel):
        raise ToolError(
            f"Permission denied: {path!r} is withheld by a read_file rule. Do not retry this call; "
            "use another approach or ask the user."
        )
    return target.rel


def _with_note(text: str, listing: _Listing) -> str:
    note = listing.note()
    return f"{text}\n{note}" if note else text


def _list_files(ctx: ToolContext, path: str = ".", recursive: bool = False) -> str:
    """Lists a folder: sub-folders end with '/'. With ``recursive``, lists every file below it.

    Args:
        path: the folder, relative to the working directory.
        recursive: list files in all sub-folders too (caches like .git and node_modules are skipped).
    """
    listing = _Listing(ctx)
    base = _directory(listing, path)
    if recursive:
        entries = list(listing.files(base))
    else:
        named = [(name, os.path.isdir(listing.ws.root / _join(base, name))) for name in _names(listing.ws, base)]
        entries = [
            name + ("/" if is_dir else "")
            for name, is_dir in sorted(named, key=lambda e: (not e[1], e[0]))
            if listing.visible(_join(base, name))
        ]
    if not entries:
        return _with_note(f"{base} is empty.", listing)
    shown = entries[:MAX_ENTRIES]
    text = "\n".join(shown)
    if len(entries) > MAX_ENTRIES:
        text += f"\n[… {len(entries) - MAX_ENTRIES:,} more entries not shown. List a sub-folder or use glob.]"
    return _with_note(text, listing)


def _names(ws: Workspace, base: str) -> list[str]:
    """The names in the folder ``base``, read through a descriptor reached without following links."""
    fd = ws.open_dir(base)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


# What can make a line's match depend on the text around the line: \A, \Z, \z, \G and lookarounds.
_CONTEXT_SENSITIVE = re.compile(r"\\[AZzG]|\(\?<?[=!]")


class _Matcher:
    """A compiled pattern whose matches, over one tool call, stop after ``MATCH_SECONDS``.

    A timeout costs about a microsecond a call, 20 times a short line's plain search, so
    ``matching_lines`` searches a whole file and checks only the lines where a match starts.
    """

    def __init__(self, pattern: str, flags: int, what: str) -> None:
        self._compiled = bounded_re.compile(pattern, flags)
        # Over the whole text in MULTILINE mode, ^ and $ still mean a line's start and end, so a
        # line that matches alone matches there too, unless the pattern looks past the line.
        self._whole = None if _CONTEXT_SENSITIVE.search(pattern) else bounded_re.compile(pattern, flags | bounded_re.MULTILINE)
        self._what = what
        self._deadline = time.monotonic() + MATCH_SECONDS

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self._too_slow()
        return left

    def _too_slow(self) -> ToolError:
        return ToolError(f"{self._what} took more than {MATCH_SECONDS:g} s to match and was stopped; it probably backtracks "
                         "(nested repeats such as '(a+)+' or '(.*)*'). Write a simpler pattern.")

    def search(self, text: str) -> bool:
        """Whether the pattern occurs in ``text``."""
        try:
            return self._compiled.search(text, timeout=self._left(), concurrent=True) is not None
        except TimeoutError:
            raise self._too_slow() from None

    def matching_lines(self, text: str) -> Iterator[tuple[int, str]]:
        """The lines of ``text`` (numbered from 1, without their newline, as grep(1) sees them) in
        which ``search`` finds the pattern, exactly as searching each line alone would.

        The next match in the whole text starts in the first line that matches alone or before it
        (a match may span lines, so its line is checked alone), and the search goes on from the
        line after: no matching line is passed over.
        """
        if self._whole is None:  # the pattern looks past a line: every line alone
            lines = enumerate(text.split("\n"), start=1)
            yield from ((n, line) for n, line in lines if (line or n <= text.count("\n")) and self.search(line))
            return
        pos, number = 0, 1  # the start of a line, and its number
        while pos < len(text):
            try:
                found = self._whole.search(text, pos, timeout=self._left(), concurrent=True)
            except TimeoutError:
                raise self._too_slow() from None
            if found is None or (found.start() == len(text) and text.endswith("\n")):  # nothing, or past the last line
                return
            start = text.rfind("\n", pos, found.start()) + 1 or pos
            number += text.count("\n", pos, start)
            end = text.find("\n", found.start())
            end = len(text) if end < 0 else end
            line = text[start:end]
            if self.search(line):
                yield number, line
            pos, number = end + 1, number + 1

    def match(self, text: str) -> bool:
        """Whether ``text`` matches the pattern from its start."""
        try:
            return self._compiled.match(text, timeout=self._left(), concurrent=True) is not None
        except TimeoutError:
            raise self._too_slow() from None


def _glob_matcher(pattern: str) -> _Matcher:
    return _Matcher(_glob_regex(pattern), 0, f"The glob {pattern!r}")


def _glob_regex(pattern: str) -> str:
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
    return "".join(out) + r"\Z"


def _glob(ctx: ToolContext, pattern: str, path: str = ".") -> str:
    """Finds files whose path matches a glob, e.g. '**/*.py' or 'notebooks/*.ipynb'.

    Args:
        pattern: the glob, relative to ``path``; '*' stays within a folder, '**' spans folders.
        path: the folder to search from, relative to the working directory.
    """
    if os.path.isabs(pattern) or ".." in Path(pattern).parts:
        raise ToolError(f"Refused: the pattern {pattern!r} leaves the search folder; write it relative to {path!r}, without '..'.")
    listing = _Listing(ctx)
    base = _directory(listing, path)
    matcher = _glob_matcher(pattern)
    found = [p for p in listing.files(base) if matcher.match(_below(p, base))]
    if not found:
        return _with_note(f"No files match {pattern!r} under {base}.", listing)
    lines = found[:MAX_ENTRIES]
    if len(found) > MAX_ENTRIES:
        lines.append(f"[… {len(found) - MAX_ENTRIES:,} more files not shown. Narrow the pattern.]")
    return _with_note("\n".join(lines), listing)


def _below(rel: str, base: str) -> str:
    """``rel`` relative to the folder ``base`` (both canonical)."""
    return rel if base == "." else rel[len(base) + 1 :]


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
        regex = _Matcher(pattern, bounded_re.IGNORECASE if ignore_case else 0, f"The pattern {pattern!r}")
    except bounded_re.error as exc:
        raise ToolError(f"{pattern!r} is not a valid regular expression ({exc}). Escape special characters like '(' with '\\'.") from None
    listing = _Listing(ctx)
    ws = listing.ws
    target = ws.resolve(path)
    if not target.path.exists():
        raise ToolError(f"No such file or folder: {path!r}.")
    check = guard(ctx, "grep")

    def opened() -> Iterator[tuple[str, int]]:
        """Each file to search, opened race-safely, with the name to show (lazily: descriptors are short-lived)."""
        if not target.path.is_dir():
            if listing.visible(target.rel):
                with contextlib.suppress(ToolError):
                    fd, resolved, _ = ws.open(path, guard=check)
                    yield resolved.rel, fd
            return
        base = _directory(listing, path)
        only = _glob_matcher(glob) if glob else None
        for rel, dir_fd, name, is_link in listing.entries(base):
            if only is not None and not only.match(_below(rel, base)):
                continue
            try:
                # A plain file is opened in the folder the walk holds open; a link goes through
                # the resolving open, which judges where it leads.
                fd = ws.open(rel, guard=check)[0] if is_link else ws.open_at(dir_fd, name, rel)
            except ToolError:
                continue  # a link to a folder, a FIFO, or a file that changed under us: not searchable text
            yield rel, fd

    matches: list[str] = []
    total = searched = binary = 0
    for shown, fd in opened():
        try:
            if os.fstat(fd).st_size > MAX_GREP_FILE_BYTES or is_binary(fd):
                binary += 1
                continue
            with io.TextIOWrapper(os.fdopen(fd, "rb", closefd=False), encoding="utf-8", errors="replace") as f:
                content = f.read()  # newlines made \n, as line by line
            searched += 1
            for number, line in regex.matching_lines(content):  # a pattern that backtracks too long raises ToolError
                total += 1
                if len(matches) < MAX_MATCHES:
                    text = line
                    if len(text) > MAX_MATCH_LINE:
                        text = text[:MAX_MATCH_LINE] + "…"
                    matches.append(f"{shown}:{number}: {text}")
        except OSError:
            continue
        finally:
            os.close(fd)
    skipped = f" ({binary} binary or very large file{'s' if binary != 1 else ''} skipped)" if binary else ""
    if not matches:
        return _with_note(f"No matches for {pattern!r} in {searched} file{'s' if searched != 1 else ''}{skipped}.", listing)
    text = "\n".join(matches)
    if total > len(matches):
        text += f"\n[… {total - len(matches):,} more matches not shown. Narrow the pattern or the path.]"
    if skipped:
        text += f"\n{skipped.strip()}"
    return truncate(_with_note(text, listing), MAX_OUTPUT_CHARS)


list_files = Tool(_list_files, name="list_files", read_only=True, category="read", permission_key=path_key("path", "."))
glob = Tool(_glob, name="glob", read_only=True, category="read", permission_key=lambda a: str(a.get("pattern", "")))
grep = Tool(_grep, name="grep", read_only=True, category="read", permission_key=lambda a: str(a.get("pattern", "")))
