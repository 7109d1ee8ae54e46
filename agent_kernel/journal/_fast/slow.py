"""journal.slow_journal — journals the fast reader cannot take: why (``layout_problems``), the
``SlowJournalWarning`` that says so, and reading them with ``json`` instead (``any_layout_chunks``).

A file with any line outside the writer's layout (``journal.format``: re-serialised by another
tool, edited by hand, an id holding a comma) gives the same columns through ``json``, only
slower and in more memory; the warning names what differs and how to make the file fast again
(``journal.rewrite_journal``). Never a silent slowdown: tests/test_journal_fast_path.py asserts
that every file the writer produces takes the fast path, and that both paths give the same frame.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agent_kernel.errors import JournalError
from agent_kernel.journal._fast.line_scan import blocks, complete_tail
from agent_kernel.journal._format import FIELD_ORDER, ITEM_SEPARATOR, KEY_SEPARATOR
from agent_kernel.journal._reader import LineCount, iter_records

__all__ = ["SlowJournalWarning", "Unparsed", "any_layout_chunks", "layout_problems", "line_by_line_records", "warn_slow"]


class SlowJournalWarning(UserWarning):
    """A journal is not in the writer's layout, so the fast reader cannot apply: it is read with
    ``json`` (same result, two to three times slower). The message says why and how to fix it."""


_DIAGNOSED_LINES = 1000  # lines looked at to say why a file is not in the writer's layout
_FAST_FIELDS = list(FIELD_ORDER)


def layout_problems(path: str | os.PathLike[str]) -> list[str]:
    """Why the journal at ``path`` is not in the writer's layout (``journal.format``), judged on
    its first lines; empty when they are in it."""
    found: dict[str, None] = {}
    with open(path, "rb") as f:
        for number, line in enumerate(f):
            if number > _DIAGNOSED_LINES:
                break
            line = line.rstrip(b"\n")
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn line; the readers warn about it themselves
            if not isinstance(record, dict) or (number == 0 and "schema" in record):
                continue
            ascii_only = line.isascii()
            if line != json.dumps(record, separators=(ITEM_SEPARATOR, KEY_SEPARATOR), ensure_ascii=ascii_only).encode():
                if line == json.dumps(record, ensure_ascii=ascii_only).encode():
                    found["spaces after separators"] = None
                else:
                    found["whitespace or escapes the writer does not write"] = None
            if list(record) != _FAST_FIELDS:
                found["keys in another order"] = None
            if not line.isascii():
                found["characters beyond ASCII not \\u-escaped"] = None
    return list(found)


def warn_slow(path: Path, stacklevel: int) -> None:
    """Says that ``path`` was read the slow way, why, and how to make it fast again."""
    problems = layout_problems(path)
    if problems:
        why = f"was not written by agent_kernel's writer ({', '.join(problems)})"
        fix = "re-write it with agent_kernel.journal.rewrite_journal(path, new_path) to make it fast (same header and events, in the writer's layout)"
    else:
        why = "has a line the fast reader cannot place (an id holding a comma, a seq beyond 18 digits, ...)"
        fix = "keep ids free of commas to make it fast"
    warnings.warn(
        SlowJournalWarning(
            f"journal {path} {why}: reading it the slow way, parsing every record with json (two to three times slower, "
            "and in more memory, than the fast reader: a million events of tool calls take well over 3 s, "
            f"see benchmarks/journal.py); {fix}."
        ),
        stacklevel=stacklevel + 1,
    )


class Unparsed(Exception):
    """A chunk of lines did not parse as one JSON array: read the file line by line instead."""


def any_layout_chunks(path: Path, stacklevel: int) -> Iterator[list[Any]]:
    """The event records of the journal at ``path``, whatever its layout, a chunk of lines at a time.

    Each chunk is parsed with one ``json.loads`` (a JSON array of its lines) rather than a call per
    line, and a chunk's records are turned into columns and let go before the next is read: with
    a call per line and every record held, a re-serialised tool-heavy journal took twice as long
    (benchmarks/journal.py). A torn last line is
    skipped with a ``TornLineWarning``.

    Raises:
        Unparsed: a chunk holds a blank or damaged line; ``line_by_line_records`` reads the file
            then (it skips blank lines and counts damaged ones).
        JournalError: the file is missing.
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None
    with f:
        for block, size in blocks(f):
            if size < 0:
                tail = bytes(block)
                if complete_tail(tail, path, stacklevel + 1):
                    yield [json.loads(tail)]
                return
            # Raw newlines only ever separate records: JSON escapes them inside strings.
            text = memoryview(block)[: size - 1].tobytes().replace(b"\n", b",")
            try:
                yield json.loads(b"[" + text + b"]")
            except ValueError:
                raise Unparsed from None


def line_by_line_records(path: Path, skip_types: Iterable[str] = ()) -> list[Any]:
    """The event records of the journal at ``path`` but ``skip_types``, each line parsed on its own
    (``reader.iter_records``): damaged lines are skipped with a ``SkippedLinesWarning``; events of
    unknown types are kept, for the caller to count as it leaves them out."""
    count = LineCount()
    with open(path, "rb") as f:
        records = list(iter_records(f.read().splitlines(keepends=True), path, count, skip_types=skip_types, stacklevel=5))
    LineCount(count.damaged).warn(path, stacklevel=5)
    return records
