"""journal.sources — many journals named at once: paths and globs resolved, headers checked.

``sql``, ``export_parquet`` and ``export_otel`` take a path, a glob (``**`` recurses) or a list
of them. A journal whose header names a schema this version does not read is left out with a
``SkippedLinesWarning``, as are garbage lines and a torn last line: a fleet of journals always
holds a few damaged ones, and one of them must not stop the query over the rest.
"""

from __future__ import annotations

import glob as globbing
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agent_kernel.errors import JournalError
from agent_kernel.journal._reader import parse_header
from agent_kernel.journal._writer import JOURNAL_SCHEMA

__all__ = ["JournalFiles", "SkippedLinesWarning", "journal_files", "read_tolerant", "warn_skipped"]

PathsLike = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


class SkippedLinesWarning(UserWarning):
    """Some lines (or whole journals) could not be read and were left out; the count says how many."""


@dataclass
class JournalFiles:
    """The journals a call reads, and those it left out for an unknown schema (path -> schema)."""

    paths: list[str]
    unknown_schema: dict[str, object] = field(default_factory=dict)


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
    is read: a header with another ``schema`` than this version writes sends the file to
    ``unknown_schema``; a file without a header is read as events.

    Raises:
        JournalError: a path does not exist, a glob matches nothing, or nothing was given.
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
        if header is not None and header.get("schema") != JOURNAL_SCHEMA:
            out.unknown_schema[path] = header.get("schema")
        else:
            out.paths.append(path)
    return out


def warn_skipped(bad_lines: int, files: JournalFiles, *, stacklevel: int = 3) -> None:
    """Warns once about what a call left out: unreadable lines and journals of an unknown schema."""
    parts = []
    if bad_lines:
        parts.append(
            f"skipped {bad_lines} line{'s' if bad_lines != 1 else ''} that are not journal records "
            "(garbage, or a last line torn by a crash)"
        )
    if files.unknown_schema:
        listed = ", ".join(f"{Path(p).name} (schema {s!r})" for p, s in list(files.unknown_schema.items())[:3])
        more = len(files.unknown_schema) - 3
        parts.append(
            f"skipped {len(files.unknown_schema)} journal{'s' if len(files.unknown_schema) != 1 else ''} of a schema this "
            f"version does not read ({listed}{f' and {more} more' if more > 0 else ''}); this version reads schema "
            f"{JOURNAL_SCHEMA}, so upgrade agent_kernel to read them"
        )
    if parts:
        warnings.warn(SkippedLinesWarning("; ".join(parts) + ". Everything else was read."), stacklevel=stacklevel)


def read_tolerant(path: str | os.PathLike[str], skip_types: Iterable[str] = ()) -> tuple[list[dict[str, object]], int]:
    """The event records of one journal, and how many of its lines were not records.

    The header (a first line with ``schema``) is not a record; garbage, a JSON value that is not
    an object with ``seq``, ``ts`` and ``type``, and a torn last line are counted, not raised.
    Lines of ``skip_types`` in the writer's canonical shape are left out without being parsed
    (the per-token deltas are most of a journal).
    """
    import json

    from agent_kernel.journal._reader import _skipped

    with open(path, "rb") as f:
        raw = f.read()
    records: list[dict[str, object]] = []
    bad = 0
    loads = json.loads
    skip = [b',"type":"' + str(kind).encode() + b'","data":' for kind in skip_types]
    for number, line in enumerate(raw.split(b"\n")):
        if not line.strip() or (skip and _skipped(line, skip)):
            continue
        try:
            record = loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(record, dict):
            bad += 1
        elif "seq" in record and "ts" in record and "type" in record:
            records.append(record)
        elif not (number == 0 and "schema" in record):
            bad += 1
    return records, bad
