"""journal.reader — the one way a journal's lines are read: its schema, damage, unknown event types.

Every reader of journals (resume, the frames, SQL, export, replay, diffs) reads lines through the
policy stated here, so a journal reads the same everywhere:

* **A newer schema is refused**, naming both versions and the upgrade to make
  (``pip install -U agent_kernel``): the records may mean something this version cannot tell.
  ``check_schema`` is the one place that says so.
* **A torn last line** (a crash mid-write) is skipped with a ``TornLineWarning``: everything
  before it is intact.
* **A damaged line anywhere else** (garbage, a fragment an older version left after a disk-full
  write) is skipped and counted, with one ``SkippedLinesWarning`` for the file, never a refusal
  of the whole journal: every record around it is still read.
* **An event type this version does not know** (written by a newer one) is not damage: readers of
  raw records (SQL, export) keep it; readers of ``AgentEvent`` objects (resume, the frames) leave
  it out. Either way it is counted and named in the warning.
"""

from __future__ import annotations

import json
import os
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_kernel.errors import JournalError
from agent_kernel.events._event import AgentEvent, EventType

JOURNAL_SCHEMA = 1
KNOWN_TYPES = frozenset(kind.value for kind in EventType)
#: An event line's envelope as DuckDB reads it: each ``AgentEvent`` field but ``data``, with its type.
ENVELOPE_SQL: tuple[tuple[str, str], ...] = (
    ("seq", "BIGINT"),
    ("ts", "DOUBLE"),
    ("session_id", "VARCHAR"),
    ("run_id", "VARCHAR"),
    ("turn_id", "VARCHAR"),
    ("parent_turn_id", "VARCHAR"),
    ("iteration", "BIGINT"),
    ("agent_id", "VARCHAR"),
    ("type", "VARCHAR"),
)


class TornLineWarning(UserWarning):
    """The last line of a journal was cut short by a crash mid-write and was skipped."""


class SkippedLinesWarning(UserWarning):
    """Some lines (or whole journals) could not be read and were left out; the count says how many."""


def parse_header(line: bytes | str) -> dict[str, Any] | None:
    """Returns the header object if ``line`` is a journal header (a JSON object with ``schema``)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "schema" in value else None


def check_schema(header: dict[str, Any] | None, path: str | os.PathLike[str]) -> None:
    """Refuses a journal written in a schema this version cannot read (a newer one).

    Raises:
        JournalError: naming the file's schema, the one this version reads, and the upgrade.
    """
    if header is None:
        return
    schema = header.get("schema")
    if schema == JOURNAL_SCHEMA:
        return
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > JOURNAL_SCHEMA:
        raise JournalError(
            f"{path} is a journal of schema {schema}, written by a newer agent_kernel; this version reads "
            f"schema {JOURNAL_SCHEMA}. Upgrade to read it: pip install -U agent_kernel"
        )
    raise JournalError(
        f"{path} names journal schema {schema!r}, which no agent_kernel writes (this version reads schema "
        f"{JOURNAL_SCHEMA}); the header was edited or the file is not a journal."
    )


@dataclass
class LineCount:
    """What a read left out or could not name: damaged lines, and events of unknown types by type."""

    damaged: int = 0
    unknown_types: Counter[str] = field(default_factory=Counter)
    damaged_lines: list[int] = field(default_factory=list)  # the first few damaged lines' numbers (from 1)

    def __iadd__(self, other: LineCount) -> LineCount:
        self.damaged += other.damaged
        self.unknown_types.update(other.unknown_types)
        return self

    def mark_damaged(self, number: int) -> None:
        """Counts the damaged line ``number``."""
        self.damaged += 1
        if len(self.damaged_lines) < 3:
            self.damaged_lines.append(number)

    def describe(self, *, kept_unknown: bool) -> list[str]:
        """The parts of a warning message for what was counted (empty when nothing was)."""
        parts = []
        if self.damaged:
            where = ""
            if self.damaged_lines:
                more = ", ..." if self.damaged > len(self.damaged_lines) else ""
                where = f" (line{'s' if self.damaged > 1 else ''} {', '.join(map(str, self.damaged_lines))}{more})"
            parts.append(
                f"skipped {self.damaged} damaged line{'s' if self.damaged != 1 else ''}{where} that {'are' if self.damaged != 1 else 'is'} "
                "not a journal record (garbage, or a fragment of a write that failed)"
            )
        if self.unknown_types:
            total = sum(self.unknown_types.values())
            names = ", ".join(f"{kind!r} ({n})" for kind, n in self.unknown_types.most_common(3))
            others = len(self.unknown_types) - 3
            verb = "kept" if kept_unknown else "left out"
            parts.append(
                f"{verb} {total} event{'s' if total != 1 else ''} of types this version does not know "
                f"({names}{f' and {others} more' if others > 0 else ''}); pip install -U agent_kernel to read them"
            )
        return parts

    def warn(self, path: str | os.PathLike[str], *, kept_unknown: bool = False, stacklevel: int = 3) -> None:
        """One ``SkippedLinesWarning`` for the file, if anything was counted."""
        parts = self.describe(kept_unknown=kept_unknown)
        if parts:
            warnings.warn(SkippedLinesWarning(f"{path}: " + "; ".join(parts) + ". Every other record was read."), stacklevel=stacklevel + 1)


def iter_records(
    lines: Iterable[bytes],
    path: str | os.PathLike[str],
    count: LineCount,
    *,
    skip_types: Iterable[str] = (),
    header_out: list[dict[str, Any]] | None = None,
    count_torn: bool = False,
    stacklevel: int = 3,
) -> Iterator[dict[str, Any]]:
    """The event records among ``lines`` (each ending in ``\\n`` but the last), as plain dicts.

    The header (a first line with ``schema``) is checked with ``check_schema`` and put in
    ``header_out``; damaged lines are counted in ``count``; a torn last line is skipped with a
    ``TornLineWarning`` (or, with ``count_torn``, counted as damaged: a fleet's one warning says it). Lines of ``skip_types`` in the writer's canonical shape are left out
    without being parsed (the per-token deltas are most of a journal).
    """
    loads = json.loads
    skip = [b',"type":"' + str(kind).encode() + b'","data":' for kind in skip_types]
    for number, line in enumerate(lines, 1):
        is_first = number == 1
        if skip and _skipped(line, skip):
            continue
        if not line.strip():
            continue
        try:
            record = loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            if not line.endswith(b"\n") and not count_torn:  # the last line, cut by a crash mid-write
                warnings.warn(
                    TornLineWarning(
                        f"{path}: skipped a torn last line ({len(line)} bytes), left by a crash mid-write; "
                        "every complete record before it was read."
                    ),
                    stacklevel=stacklevel + 1,
                )
                return
            count.mark_damaged(number)
            continue
        if is_first and "schema" in record:
            check_schema(record, path)
            if header_out is not None:
                header_out.append(record)
            continue
        if "seq" not in record or "ts" not in record or "type" not in record:
            count.mark_damaged(number)
            continue
        if record["type"] not in KNOWN_TYPES:
            count.unknown_types[str(record["type"])] += 1
        yield record


def events_of(records: Iterable[dict[str, Any]], count: LineCount) -> Iterator[AgentEvent]:
    """``AgentEvent`` objects of ``records``: unknown types are left out (they are counted as read)."""
    known = KNOWN_TYPES
    from_dict = AgentEvent.from_dict
    for record in records:
        if record["type"] not in known:
            continue
        try:
            yield from_dict(record)
        except (KeyError, ValueError, TypeError):
            count.damaged += 1


def _file_lines(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None


def _lines(raw: bytes) -> list[bytes]:
    """``raw`` as lines, each with its line end (the last without one if the file does not end in one).

    JSON escapes every control character inside a string, so a line end is always a record's end.
    """
    return raw.splitlines(keepends=True)


def read_records(
    path: str | os.PathLike[str], *, skip_types: Iterable[str] = ()
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Reads the header (``None`` if the file has none) and every event record as a plain dict.

    Damaged lines are skipped with one ``SkippedLinesWarning``; events of unknown types are kept
    (and named in it).

    Args:
        path: the journal file.
        skip_types: event types to leave out. Lines in the writer's canonical shape are
            recognised without parsing them, which makes skipping the per-token deltas cheap.

    Raises:
        JournalError: the file is missing, or its schema is newer than this version reads.
    """
    path = Path(path)
    header: list[dict[str, Any]] = []
    count = LineCount()
    records = list(iter_records(_lines(_file_lines(path)), path, count, skip_types=skip_types, header_out=header, stacklevel=3))
    count.warn(path, kept_unknown=True, stacklevel=3)
    return (header[0] if header else None), records


def _skipped(line: bytes, markers: list[bytes]) -> bool:
    """True if a canonical line's envelope names one of the types behind ``markers``.

    Only the top-level ``type`` key can be followed by ``,"data":`` in a line that starts with
    ``{"seq":`` and has no ``{`` before it (values before ``data`` are scalars), so this never
    skips a line it should keep; a line in another shape is simply parsed.
    """
    at = line.find(b',"type":"')
    if at < 0 or not line.startswith(b'{"seq":') or line.find(b"{", 1, at) >= 0:
        return False
    return any(line.startswith(marker, at) for marker in markers)


def read_json_sql(paths: Iterable[str | os.PathLike[str]], *, data: str = "JSON", filename: bool = False, longest_line: int = 256 << 20) -> str:
    """DuckDB's ``read_json`` call over the journals at ``paths``, for a ``FROM`` clause.

    The columns are explicit, never inferred: ``ENVELOPE_SQL``, then ``data`` as the DuckDB type
    ``data`` (``JSON`` keeps each payload's text; ``MAP(VARCHAR, JSON)`` gives each key with its
    value's JSON text), then the header's ``schema``. A line that is not a JSON object of those
    types becomes a row of NULLs, for the caller to count as damaged under this module's policy;
    blank lines give no row. A line longer than ``longest_line`` bytes fails the whole read
    (``duckdb.InvalidInputException``); DuckDB buffers about that much of the file while it reads.
    ``filename`` adds the file of each row.

    The SQL views (``journal.sql``), the Parquet export and the frames of a journal the fast
    reader cannot take (``journal._fast``) all read journals through this one call.
    """
    columns = ", ".join(f"{name}: '{kind}'" for name, kind in (*ENVELOPE_SQL, ("data", data), ("schema", "BIGINT")))
    listed = ", ".join("'" + os.fspath(path).replace("'", "''") + "'" for path in paths)
    return (
        f"read_json([{listed}], format='newline_delimited', ignore_errors=true, filename={str(filename).lower()}, "
        f"maximum_object_size={longest_line}, columns={{{columns}}})"
    )


def read_header(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The header of the journal at ``path`` (schema, session_id, created, metadata), or ``None``."""
    try:
        with open(path, "rb") as f:
            return parse_header(f.readline())
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None


def read_events(path: str | os.PathLike[str], count: LineCount | None = None) -> list[AgentEvent]:
    """Every event recorded in the journal at ``path``, in file order.

    A torn last line is skipped with a ``TornLineWarning``; damaged lines, and events of types
    this version does not know, are left out with one ``SkippedLinesWarning`` naming how many (or,
    given ``count``, counted there instead, for a caller that says so in its own terms).

    Raises:
        JournalError: the file is missing, or its schema is newer than this version reads.

    Example:
        >>> events = read_events(".agent_kernel/sessions/s_1234.jsonl")  # doctest: +SKIP
        >>> events[0].type
        <EventType.RUN_START: 'run_start'>
    """
    path = Path(path)
    counted = count if count is not None else LineCount()
    events = list(events_of(iter_records(_lines(_file_lines(path)), path, counted, stacklevel=3), counted))
    if count is None:
        counted.warn(path, stacklevel=2)
    return events
