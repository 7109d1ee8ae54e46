"""journal.sources — many journals named at once: paths and globs resolved, headers checked.

``sql``, ``export_parquet`` and ``export_otel`` take a path, a glob (``**`` recurses) or a list
of them. Lines are read by the journal's one policy (``journal.reader``): a journal of a newer
schema is refused, naming it and the upgrade; garbage lines and a torn last line are skipped with
a ``SkippedLinesWarning`` (a fleet of journals always holds a few damaged ones, and one of them
must not stop the query over the rest); events of unknown types are kept and counted.
"""

from __future__ import annotations

import glob as globbing
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent_kernel.errors import JournalError
from agent_kernel.journal._reader import LineCount, SkippedLinesWarning, check_schema, iter_records, parse_header

PathsLike = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


@dataclass
class JournalFiles:
    """The journals a call reads, each checked to be of a schema this version reads."""

    paths: list[str]


def _expand(item: str | os.PathLike[str]) -> list[str]:
    text = os.fspath(item)
    if globbing.has_magic(text):
        matches = sorted(p for p in globbing.glob(text, recursive=True) if os.path.isfile(p))
        if not matches:
            raise JournalError(f"no journal matches {text!r}; check the pattern (e.g. 'runs/**/*.jsonl').")
        return matches
    if os.path.isdir(text):
        # pathlib, not glob: glob's ** skips hidden folders, and agents write to .agent_kernel/sessions.
        matches = sorted(str(p) for p in Path(text).rglob("*.jsonl") if p.is_file())
        if not matches:
            raise JournalError(f"no journal (*.jsonl) under the folder {text!r}; pass a glob such as '{text}/**/*.jsonl'.")
        return matches
    if not os.path.isfile(text):
        raise JournalError(f"no journal at {text!r}; check the path, or pass a glob such as 'runs/*.jsonl'.")
    return [text]


def journal_files(paths: PathsLike) -> JournalFiles:
    """Resolves ``paths`` (a path, a folder, a glob, or a list of them) to journal files.

    Files are absolute, deduplicated and in order (sorted within each glob). Each file's first line
    is read and checked (``reader.check_schema``); a file without a header is read as events.

    Raises:
        JournalError: a path does not exist, a glob matches nothing, nothing was given, or a
            journal's schema is newer than this version reads (named, with the upgrade).
    """
    if not isinstance(paths, (str, os.PathLike, Iterable)) or isinstance(paths, bytes):
        raise JournalError(f"cannot read journals from {type(paths).__name__}; pass a path, a glob such as 'runs/*.jsonl', or a list of them.")
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not all(isinstance(item, (str, os.PathLike)) for item in items):
        raise JournalError("every journal in the list must be a path or a glob; pass e.g. ['runs/a.jsonl', 'runs/b/*.jsonl'].")
    if not items:
        raise JournalError("no journal paths given; pass a path, a glob such as 'runs/*.jsonl', or a list of them.")
    seen: dict[str, None] = {}
    for item in items:
        for path in _expand(item):
            seen.setdefault(str(Path(path).resolve()), None)
    out = JournalFiles([])
    for path in seen:
        with open(path, "rb") as f:
            header = parse_header(f.readline())
        check_schema(header, path)
        out.paths.append(path)
    return out


def warn_skipped(bad_lines: int, files: JournalFiles, *, stacklevel: int = 3, unknown_types: LineCount | None = None) -> None:
    """Warns once about what a call over ``files`` left out (damaged lines) or could not name (unknown types)."""
    count = LineCount(bad_lines)
    if unknown_types is not None:
        count += unknown_types
    parts = count.describe(kept_unknown=True)
    if parts:
        warnings.warn(SkippedLinesWarning("; ".join(parts) + ". Everything else was read."), stacklevel=stacklevel)


def read_tolerant(path: str | os.PathLike[str], skip_types: Iterable[str] = ()) -> tuple[list[dict[str, object]], int]:
    """The event records of one journal (unknown types kept), and how many of its lines were damaged.

    Read by ``reader.iter_records``: the header is not a record; garbage, a JSON value that is not
    an object with ``seq``, ``ts`` and ``type``, and a torn last line are counted, not raised.
    Lines of ``skip_types`` in the writer's canonical shape are left out without being parsed.
    """
    with open(path, "rb") as f:
        raw = f.read()
    count = LineCount()
    records: list[dict[str, object]] = list(iter_records(raw.splitlines(keepends=True), path, count, skip_types=skip_types, count_torn=True))
    return records, count.damaged
