"""journal.reader — reading a journal file back into its header and ``AgentEvent`` records.

A crash can leave the last line half-written. Such a torn last line is skipped with a
``TornLineWarning`` (a warning, never an exception), because everything before it is intact.
A damaged line anywhere else means the file was edited or corrupted, and raises ``JournalError``
naming the line.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_kernel.errors import JournalError
from agent_kernel.events._event import AgentEvent

__all__ = ["TornLineWarning", "parse_header", "read_events", "read_header", "read_records"]


class TornLineWarning(UserWarning):
    """The last line of a journal was cut short by a crash mid-write and was skipped."""


def parse_header(line: bytes | str) -> dict[str, Any] | None:
    """Returns the header object if ``line`` is a journal header (a JSON object with ``schema``)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "schema" in value else None


def read_records(
    path: str | os.PathLike[str], *, skip_types: Iterable[str] = ()
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Reads the header (``None`` if the file has none) and every event record as a plain dict.

    Args:
        path: the journal file.
        skip_types: event types to leave out. Lines in the writer's canonical shape are
            recognised without parsing them, which makes skipping the per-token deltas cheap.

    Raises:
        JournalError: the file is missing, or a line other than the last is not valid JSON.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None
    lines = raw.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline, as a complete journal does
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    loads = json.loads
    skip = [b',"type":"' + str(kind).encode() + b'","data":' for kind in skip_types]
    for number, line in enumerate(lines, 1):
        if skip and _skipped(line, skip):
            continue
        if not line.strip():
            continue
        try:
            record = loads(line)
        except ValueError as exc:
            raise JournalError(
                f"{path}, line {number}: not valid JSON ({exc}). A crash only ever damages the last line, so "
                "this file was edited or corrupted; repair or remove that line."
            ) from None
        if number == 1 and isinstance(record, dict) and "schema" in record:
            header = record
        else:
            records.append(record)
    if torn.strip():
        try:
            record = loads(torn)
        except ValueError:
            warnings.warn(
                TornLineWarning(
                    f"{path}: skipped a torn last line ({len(torn)} bytes), left by a crash mid-write; "
                    "every complete record before it was read."
                ),
                stacklevel=3,
            )
        else:  # complete, only its newline is missing
            if not lines and isinstance(record, dict) and "schema" in record:
                header = record
            else:
                records.append(record)
    return header, records


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


def read_header(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The header of the journal at ``path`` (schema, session_id, created, metadata), or ``None``."""
    try:
        with open(path, "rb") as f:
            return parse_header(f.readline())
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None


def read_events(path: str | os.PathLike[str]) -> list[AgentEvent]:
    """Every event recorded in the journal at ``path``, in file order.

    A torn last line is skipped with a ``TornLineWarning``.

    Example:
        >>> events = read_events(".agent_kernel/sessions/s_1234.jsonl")  # doctest: +SKIP
        >>> events[0].type
        <EventType.RUN_START: 'run_start'>
    """
    _, records = read_records(path)
    return [_event(record, path, i) for i, record in enumerate(records)]


def _event(record: Any, path: str | os.PathLike[str], index: int) -> AgentEvent:
    try:
        return AgentEvent.from_dict(record)
    except (KeyError, ValueError, TypeError) as exc:
        raise JournalError(
            f"{path}: record {index + 1} is not an agent event ({exc!r}); was the file written by agent_kernel?"
        ) from None
