"""journal.columns — events as columns (NumPy and Arrow arrays), read fast from a journal file.

``frames.events_df`` is built from an ``EventColumns``. Two builders produce one:

* ``columns_from_events`` walks a list of events (or event dicts): the path for a live agent.
* ``columns_from_file`` reads a journal file written by ``Journal``. Every record there has the one
  layout ``journal.format`` states (compact separators, ASCII, keys in a fixed order with ``data``
  last), so the envelope of a million lines is located and parsed with vectorised NumPy byte
  operations instead of a JSON parser per line: the id sections that repeat on every line of a
  turn are parsed once each (one json call per chunk), the type is read from a few machine words,
  ``seq`` and ``ts`` are parsed column-wise. Payloads that are one plain string under one key
  (most per-token deltas) are gathered straight into an Arrow string array; flat payloads (scalar
  values only, told apart per row by their braces and brackets) of frequent types go to Arrow's
  JSON reader in one buffer per type; the rest (nested values, rare types) to one ``json.loads``
  per chunk, transposed into columns a key set at a time. Chunks of the file are parsed on every
  core, and the garbage collector is paused while a file is read (``paused_gc``).

A file with any line in another layout (re-serialised by another tool, edited by hand) is read
entirely through ``json`` instead, giving the same columns, only several times slower; a
``SlowJournalWarning`` says so, names what differs (``layout_problems``) and how to make the
file fast again (``journal.rewrite_journal``). Never a silent slowdown: tests/test_journal_fast_path.py
asserts that every file the writer produces takes the fast path, and that both paths give the
same frame for generated journals.

Data values become columns by kind (see ``data_kind``): booleans, integers, numbers and strings
get typed columns; objects, arrays and mixed values stay Python objects, exactly as ``json.loads``
returns them. Arrow is used for payloads only when the inferred schema is flat, because Arrow
merges differently-keyed objects into one struct and would invent keys.

Figures: ``benchmarks/journal.py`` (four kinds of 1,000,000-event journal). Text-heavy journals
cost a fraction of ``json.loads`` over their lines. On tool-heavy and crew journals the payloads
with nested values (arguments, messages, tool results echoed in ``recursion``) still go through
``json``, which holds the GIL, so those cost about what ``json.loads`` over every line does, in
under 2.4x the file's size; a re-serialised journal is read through ``json`` entirely.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ..errors import JournalError
from ..events import AgentEvent, EventType
from .format import (
    DATA_KEY,
    FIELD_ORDER,
    GROUP_FIELDS,
    ID_SECTION_START,
    ITEM_SEPARATOR,
    KEY_SEPARATOR,
    LINE_END,
    MAX_ID_SECTION,
    MAX_SEQ_DIGITS,
    MAX_TYPE_NAME,
    MIN_LINE,
    SEQ_KEY,
    STRING_PAYLOAD_CLOSE,
    STRING_PAYLOAD_KEY_END,
    STRING_PAYLOAD_OPEN,
    TOP_LEVEL_COMMAS,
    TS_KEY,
    TYPE_KEY,
)
from .reader import TornLineWarning, parse_header, read_records

__all__ = [
    "EVENT_TYPES",
    "ID_FIELDS",
    "DataPiece",
    "EventColumns",
    "SlowJournalWarning",
    "columns_from_events",
    "columns_from_file",
    "layout_problems",
    "paused_gc",
    "records_from_file",
]

EVENT_TYPES: tuple[str, ...] = tuple(kind.value for kind in EventType)
ID_FIELDS = ("session_id", "run_id", "turn_id", "parent_turn_id", "agent_id")
_GROUP_FIELDS = GROUP_FIELDS
_TYPE_CODE = {name: code for code, name in enumerate(EVENT_TYPES)}
_CHUNK = 16 << 20  # bytes read and parsed at a time: bounds the working memory
_ARROW_MIN_ROWS = 512  # below this a type's payloads are parsed with json
_FLAT_ARROW = (pa.types.is_boolean, pa.types.is_int64, pa.types.is_float64, pa.types.is_string, pa.types.is_null)

Values: TypeAlias = "pa.Array | list[Any]"


@dataclass
class DataPiece:
    """Values of one data key for some rows: ``rows`` (int64 row numbers) and ``values``."""

    rows: np.ndarray
    values: Values


@dataclass
class EventColumns:
    """The events of one source as columns.

    Attributes:
        length: the number of events.
        seq, ts: int64 and float64 (seconds since the epoch) arrays.
        group: int64 array indexing ``groups``: the id fields shared by runs of events.
        groups: one dict per distinct (session_id, run_id, turn_id, parent_turn_id, iteration,
            agent_id, parent_agent_id).
        type_code: int16 array indexing ``EVENT_TYPES``.
        data: for each data key, the pieces holding its values.
    """

    length: int = 0
    seq: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    ts: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    group: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    groups: list[dict[str, Any]] = field(default_factory=list)
    type_code: np.ndarray = field(default_factory=lambda: np.empty(0, np.int16))
    data: dict[str, list[DataPiece]] = field(default_factory=dict)


class _NotCanonical(Exception):
    """A line is not in the writer's canonical shape: read the file with json instead."""


class SlowJournalWarning(UserWarning):
    """A journal is not in the writer's layout, so the fast reader cannot apply: it is read line by
    line with ``json`` (same result, several times slower). The message says why and how to fix it."""


class _Builder:
    """Accumulates chunks of columns, then concatenates them once."""

    def __init__(self) -> None:
        self.length = 0
        self.seq: list[np.ndarray] = []
        self.ts: list[np.ndarray] = []
        self.group: list[np.ndarray] = []
        self.type_code: list[np.ndarray] = []
        self.group_index: dict[Any, int] = {}
        self.groups: list[dict[str, Any]] = []
        self.data: dict[str, list[DataPiece]] = {}

    def group_of(self, key: Any, fields: dict[str, Any]) -> int:
        code = self.group_index.get(key)
        if code is None:
            code = self.group_index[key] = len(self.groups)
            self.groups.append(fields)
        return code

    def add_rows(self, rows: np.ndarray, payloads: list[Any]) -> None:
        """Adds data dicts for ``rows`` (global row numbers), one piece per key and key set."""
        for key, pieces in _pivot(rows, payloads).items():
            self.data.setdefault(key, []).extend(pieces)

    def add_table(self, rows: np.ndarray, table: pa.Table) -> None:
        for name in table.column_names:
            self.data.setdefault(name, []).append(DataPiece(rows, table.column(name).combine_chunks()))

    def merge(self, part: _Part | None) -> None:
        """Appends one chunk's columns after those merged so far."""
        if part is None:
            return
        base = self.length
        index = self.group_index
        mapping = np.asarray(
            [index[text] if text in index else self.group_of(text, fields) for text, fields in zip(part.id_texts, part.id_fields)],
            np.int64,
        )
        self.seq.append(part.seq)
        self.ts.append(part.ts)
        self.group.append(mapping[part.id_codes])
        self.type_code.append(part.type_code)
        self.length += part.length
        for rows, table in part.tables:
            self.add_table(rows + base, table)
        for key, pieces in part.json_pieces.items():
            self.data.setdefault(key, []).extend(DataPiece(piece.rows + base, piece.values) for piece in pieces)

    def finish(self) -> EventColumns:
        def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(0, dtype)

        return EventColumns(
            self.length,
            cat(self.seq, np.int64),
            cat(self.ts, np.float64),
            cat(self.group, np.int64),
            self.groups,
            cat(self.type_code, np.int16),
            self.data,
        )


def _pivot(rows: np.ndarray, payloads: list[Any], kinds: np.ndarray | None = None) -> dict[str, list[DataPiece]]:
    """Data dicts of ``rows`` turned into pieces per key.

    Payloads are grouped by type (``kinds``, when known), and a group whose payloads all have
    the same keys in the same order (a type writes the same keys nearly every time) is
    transposed with one ``zip``: C loops instead of a Python step per value, which matters for
    the json-parsed rows of a tool-heavy journal. Other groups are split by key tuple first.
    """
    out: dict[str, list[DataPiece]] = {}
    if not payloads:
        return out
    groups: list[tuple[np.ndarray, Sequence[Any]]]
    if kinds is None or (kinds == kinds[0]).all():
        groups = [(rows, payloads)]
    else:
        order = np.argsort(kinds, kind="stable")
        cuts = np.flatnonzero(np.diff(kinds[order])) + 1
        groups = [(rows[at], [payloads[i] for i in at.tolist()]) for at in np.split(order, cuts)]
    for where, group in groups:
        shapes = list(map(tuple, group))
        if shapes.count(shapes[0]) == len(shapes):
            split: Iterable[tuple[tuple[str, ...], np.ndarray, Sequence[Any]]] = [(shapes[0], where, group)]
        else:
            split = _by_shape(where, group, shapes)
        for keys, chosen, members in split:
            for key, values in zip(keys, zip(*map(dict.values, members))):
                out.setdefault(key, []).append(DataPiece(chosen, list(values)))
    return out


def _by_shape(rows: np.ndarray, payloads: Sequence[Any], shapes: list[tuple[str, ...]]) -> list[tuple[tuple[str, ...], np.ndarray, list[Any]]]:
    """``payloads`` (with their ``rows``) split by key tuple."""
    found: dict[tuple[str, ...], list[int]] = {}
    for at, keys in enumerate(shapes):
        where = found.get(keys)
        if where is None:
            where = found[keys] = []
        where.append(at)
    return [(keys, rows[where], [payloads[i] for i in where]) for keys, where in found.items() if keys]


def _field(record: Any, name: str) -> Any:
    return getattr(record, name, None) if not isinstance(record, dict) else record.get(name)


def columns_from_events(events: Iterable[AgentEvent | dict[str, Any]]) -> EventColumns:
    """Columns of ``events`` (``AgentEvent`` objects or ``AgentEvent.to_dict()`` dicts)."""
    builder = _Builder()
    seq: list[int] = []
    ts: list[float] = []
    group: list[int] = []
    type_code: list[int] = []
    payloads: list[Any] = []
    for record in events:
        ids = tuple(_field(record, name) for name in _GROUP_FIELDS) + (_field(record, "parent_agent_id"),)
        code = builder.group_index.get(ids)
        if code is None:
            fields = dict(zip((*_GROUP_FIELDS, "parent_agent_id"), ids))
            code = builder.group_of(ids, fields)
        kind = _field(record, "type")
        try:
            type_code.append(_TYPE_CODE[str(kind)])
        except KeyError:
            raise JournalError(f"unknown event type {kind!r}; is this journal from a newer agent_kernel?") from None
        seq.append(int(_field(record, "seq")))
        ts.append(float(_field(record, "ts")))
        group.append(code)
        payloads.append(_field(record, "data") or {})
    builder.length = len(seq)
    builder.seq.append(np.asarray(seq, np.int64))
    builder.ts.append(np.asarray(ts, np.float64))
    builder.group.append(np.asarray(group, np.int64))
    builder.type_code.append(np.asarray(type_code, np.int16))
    builder.add_rows(np.arange(len(seq), dtype=np.int64), payloads)
    return builder.finish()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pauses the cyclic garbage collector while a journal is read.

    Parsing payloads creates millions of containers, none of them garbage, and each collection
    the allocations trigger walks them all again: on a tool-heavy journal that was a third of
    the CPU time of ``events_df`` (benchmarks/journal.py). Reference counting still frees
    everything; the collector resumes (if it was on) when the read ends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def columns_from_file(path: str | os.PathLike[str]) -> EventColumns:
    """Columns of the journal at ``path``: the fast path for canonical files, json otherwise.

    A torn last line is skipped with a ``TornLineWarning``; a file in another layout is read
    with a ``SlowJournalWarning`` saying why.
    """
    with paused_gc():
        return _columns_from_file(path)


def _columns_from_file(path: str | os.PathLike[str]) -> EventColumns:
    try:
        return _read_canonical(Path(path))
    except _NotCanonical:
        _, records = read_records(path)
        columns = columns_from_events(records)  # an unknown event type raises here, before any warning
        _warn_slow(Path(path), stacklevel=4)  # events_df's caller
        return columns


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


def _warn_slow(path: Path, stacklevel: int) -> None:
    """Says that ``path`` was read line by line, why, and how to make it fast again."""
    problems = layout_problems(path)
    if problems:
        why = f"was not written by agent_kernel's writer ({', '.join(problems)})"
        fix = "re-write it with agent_kernel.journal.rewrite_journal(path, new_path) to make it fast (same header and events, in the writer's layout)"
    else:
        why = "has a line the fast reader cannot place (an id holding a comma, a seq beyond 18 digits, ...)"
        fix = "keep ids free of commas to make it fast"
    warnings.warn(
        SlowJournalWarning(
            f"journal {path} {why}: reading it the slow way, parsing every line with json (several times slower, "
            "and more memory, than the fast reader: a million events of tool calls take well over 3 s and 3x the "
            f"file's size, see benchmarks/journal.py); {fix}."
        ),
        stacklevel=stacklevel + 1,
    )


def _blocks(f: Any) -> Iterator[tuple[bytearray, int]]:
    """Chunks of whole lines (buffer, size), then the unterminated tail as ``(tail, -1)``."""
    first = f.readline()
    carry = first if parse_header(first) is None else b""
    while True:
        # One buffer per chunk: the carried partial line, the new bytes, then zero padding that
        # fixed-width reads may run into past the last line.
        block = bytearray(len(carry) + _CHUNK + _PAD)
        block[: len(carry)] = carry
        got = f.readinto(memoryview(block)[len(carry) : len(carry) + _CHUNK])
        if not got:
            break
        size = len(carry) + got
        cut = block.rfind(b"\n", 0, size) + 1
        carry = bytes(block[cut:size])
        if cut:
            block[cut:] = bytes(len(block) - cut)
            yield block, cut
    yield bytearray(carry), -1


def _read_canonical(path: Path) -> EventColumns:
    if sys.byteorder != "little":  # the byte tricks below read words in little-endian order
        raise _NotCanonical
    builder = _Builder()
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None
    # NumPy and Arrow release the GIL for most of a chunk's work, so chunks parse in worker
    # threads, one per core, while this one reads ahead and merges them in file order (at most
    # a few are in memory at once; merging is mostly waiting).
    workers = worker_threads()
    with f, ThreadPoolExecutor(workers, thread_name_prefix="journal-read") as pool:
        pending: deque[Future[_Part | None]] = deque()
        tail = b""
        for block, size in _blocks(f):
            if size < 0:
                tail = bytes(block)
                break
            pending.append(pool.submit(_parse_chunk, block, size))
            while len(pending) > workers:
                builder.merge(pending.popleft().result())
        while pending:
            builder.merge(pending.popleft().result())
    if _complete_tail(tail, path):
        builder.merge(_parse_chunk(bytearray(tail + b"\n" + bytes(_PAD)), len(tail) + 1))
    return builder.finish()


def worker_threads() -> int:
    """Worker threads for the parallel parts of reading: one per usable core, at most four."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def _complete_tail(tail: bytes, path: Path) -> bool:
    """Whether the unterminated last line is a whole record (else it is torn: warn, skip it)."""
    if not tail.strip():
        return False
    try:
        json.loads(tail)
    except ValueError:
        warnings.warn(
            TornLineWarning(
                f"{path}: skipped a torn last line ({len(tail)} bytes), left by a crash mid-write; "
                "every complete record before it was read."
            ),
            stacklevel=6,
        )
        return False
    return True


def records_from_file(path: str | os.PathLike[str], skip_types: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The event records of a journal as dicts, leaving out ``skip_types``.

    On a canonical file the types are found column-wise, so only the records kept are parsed:
    the per-token deltas, nine in ten lines of a long session, cost next to nothing. Other files
    go through ``reader.read_records``. A torn last line is skipped with a ``TornLineWarning``.
    """
    skip = np.asarray(sorted(_TYPE_CODE[str(kind)] for kind in skip_types), np.int16)
    with paused_gc():
        return _records_from_file(path, skip, skip_types)


def _records_from_file(path: str | os.PathLike[str], skip: np.ndarray, skip_types: Iterable[str]) -> list[dict[str, Any]]:
    try:
        return _canonical_records(Path(path), skip)
    except _NotCanonical:
        records = read_records(path, skip_types=skip_types)[1]
        _warn_slow(Path(path), stacklevel=5)  # the caller of turns_df and the other frames
        return records


def _canonical_records(path: Path, skip: np.ndarray) -> list[dict[str, Any]]:
    if sys.byteorder != "little":
        raise _NotCanonical
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None
    records: list[dict[str, Any]] = []
    with f:
        for block, size in _blocks(f):
            if size < 0:
                if _complete_tail(bytes(block), path):
                    records.extend(_kept_records(bytearray(bytes(block) + b"\n" + bytes(_PAD)), len(block) + 1, skip))
                break
            records.extend(_kept_records(block, size, skip))
    return records


def _kept_records(chunk: bytearray, size: int, skip: np.ndarray) -> list[dict[str, Any]]:
    lines = _locate(chunk, size)
    if lines is None:
        return []
    keep = np.flatnonzero(~np.isin(lines.codes, skip))
    view = memoryview(chunk)
    joined = b",".join([view[b:e] for b, e in zip(lines.starts[keep].tolist(), lines.ends[keep].tolist())])
    try:
        records = json.loads(b"[" + joined + b"]")
    except ValueError:
        raise _NotCanonical from None
    if len(records) != len(keep):
        raise _NotCanonical
    return records


_PAD = 64  # zero bytes after a chunk, so a fixed-width window never runs past the buffer
# The writer's layout (journal.format) as bytes: every position below is found from these.
_SEQ_KEY, _TS_KEY, _TYPE_KEY, _DATA_KEY = (text.encode() for text in (SEQ_KEY, TS_KEY, TYPE_KEY, DATA_KEY))
_ID_SECTION_START, _LINE_END = ID_SECTION_START.encode(), LINE_END.encode()
_RECORD_CLOSE = _LINE_END.rstrip(b"\n")  # "}" after the payload, then the newline
_STRING_OPEN, _STRING_KEY_END, _STRING_CLOSE = (text.encode() for text in (STRING_PAYLOAD_OPEN, STRING_PAYLOAD_KEY_END, STRING_PAYLOAD_CLOSE))
_MAX_FAST_PAYLOAD = 1 << 16  # longer payloads of a frequent type are parsed with json


def _windows(buf: np.ndarray, width: int) -> np.ndarray:
    return np.lib.stride_tricks.sliding_window_view(buf, width)


def _words(buf: np.ndarray, dtype: str) -> np.ndarray:
    """``buf`` read as overlapping little-endian words, one starting at every byte."""
    size = np.dtype(dtype).itemsize
    return np.ndarray((len(buf) - size + 1,), dtype=dtype, buffer=buf, strides=(1,))


def _matches_each(buf: np.ndarray, positions: np.ndarray, pattern: bytes) -> np.ndarray:
    """For each of ``positions``, whether ``pattern`` starts there in ``buf``."""
    words = _words(buf, "<u8")
    padded = pattern + bytes(-len(pattern) % 8)
    ok = np.ones(len(positions), bool)
    for k in range(0, len(pattern), 8):
        expected = np.frombuffer(padded[k : k + 8], "<u8")[0]
        mask = np.uint64((1 << (8 * min(8, len(pattern) - k))) - 1)
        ok &= (words[positions + k] & mask) == expected
    return ok


def _matches(buf: np.ndarray, positions: np.ndarray, pattern: bytes) -> bool:
    """True if every one of ``positions`` starts an occurrence of ``pattern`` in ``buf``."""
    return bool(_matches_each(buf, positions, pattern).all())


def _views(buf: np.ndarray, data: pa.Buffer, begin: np.ndarray, end: np.ndarray) -> pa.Array:
    """The byte ranges ``[begin, end)`` of the chunk as an Arrow binary_view array, without copying.

    A view is 16 bytes: the length, then up to 12 bytes inline (zero padded), or a 4-byte prefix,
    a buffer index (0: ``data``, the chunk itself) and an offset for longer values.
    """
    n = len(begin)
    length = (end - begin).astype(np.int32)
    words = np.zeros((n, 4), np.int32)
    words[:, 0] = length
    long = length > 12
    if long.all():
        words[:, 1] = _prefix(buf, begin)
        words[:, 3] = begin
    else:
        at = begin[long]
        words[long, 1] = _prefix(buf, at)
        words[long, 3] = at
        short = ~long
        at, size = begin[short], length[short].astype(np.int64)
        low = _words(buf, "<u8")[at] & _low_bytes(np.minimum(size, 8))
        high = _words(buf, "<u4")[at + 8] & _low_bytes(np.clip(size - 8, 0, 4)).astype(np.uint32)
        inline = words[short]
        inline[:, 1:3] = low.view(np.int32).reshape(-1, 2)
        inline[:, 3] = high.view(np.int32)
        words[short] = inline
    return pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(words), data])


def _prefix(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The four bytes at each of ``at`` as int32 (aligned byte reads beat unaligned word reads)."""
    word = buf[at].astype(np.uint32)
    for k in (1, 2, 3):
        word |= buf[at + k].astype(np.uint32) << np.uint32(8 * k)
    return word.view(np.int32)


def _low_bytes(count: np.ndarray) -> np.ndarray:
    """uint64 masks keeping the ``count`` (0 to 8) lowest bytes."""
    bits = (count * 8).astype(np.uint64)
    full = bits >= 64
    mask = (np.uint64(1) << np.where(full, 0, bits).astype(np.uint64)) - np.uint64(1)
    return np.where(full, np.uint64(0xFFFFFFFFFFFFFFFF), mask)


@dataclass
class _Part:
    """One chunk's columns, with row numbers local to the chunk (``_Builder.merge`` offsets them)."""

    length: int
    seq: np.ndarray
    ts: np.ndarray
    id_texts: list[bytes]
    id_fields: list[dict[str, Any]]
    id_codes: np.ndarray
    type_code: np.ndarray
    tables: list[tuple[np.ndarray, pa.Table]]
    json_pieces: dict[str, list[DataPiece]]


@dataclass
class _Lines:
    """Where the fields of each canonical line of a chunk are (byte positions, int64 arrays)."""

    buf: np.ndarray
    data: pa.Buffer
    starts: np.ndarray
    ends: np.ndarray
    ts_at: np.ndarray
    ids_at: np.ndarray
    type_at: np.ndarray
    data_at: np.ndarray
    codes: np.ndarray  # int16 indices into EVENT_TYPES


def _locate(chunk: bytearray, size: int) -> _Lines | None:
    """Finds the fields of ``chunk[:size]`` (whole canonical lines, then ``_PAD`` zero bytes).

    A canonical line has exactly ``TOP_LEVEL_COMMAS`` commas before its payload (see
    ``journal.format``; an id holding a comma sends the file to the json path). So every field
    boundary is found by indexing the sorted comma positions, and checked against the key text the
    writer puts there.
    """
    buf = np.frombuffer(chunk, np.uint8)
    data = pa.py_buffer(chunk)
    ends = np.flatnonzero(buf[:size] == 10)
    n = len(ends)
    if n == 0:
        return None
    starts = np.empty(n, np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    commas = np.flatnonzero(buf[:size] == 44)
    first = np.searchsorted(commas, starts)
    if (ends - starts + 1 < MIN_LINE).any() or (first + TOP_LEVEL_COMMAS >= len(commas)).any():
        raise _NotCanonical
    ts_at, ids_at = commas[first], commas[first + 1]
    type_at = commas[first + TOP_LEVEL_COMMAS - 1]
    data_at = commas[first + TOP_LEVEL_COMMAS] - 1  # DATA_KEY starts with the type name's closing quote
    if (data_at >= ends).any():
        raise _NotCanonical
    # Key checks (eight bytes a compare); the id section is checked by parsing it, the type name
    # against the vocabulary, so a line of another shape cannot slip through.
    payload_at = data_at + len(_DATA_KEY)
    ok = (
        _matches(buf, starts, _SEQ_KEY)
        and _matches(buf, ts_at, _TS_KEY)
        and _matches(buf, type_at, _TYPE_KEY)
        and _matches(buf, data_at, _DATA_KEY)
        and _matches(buf, ends - len(_RECORD_CLOSE), _LINE_END)
        and bool((buf[payload_at] == 123).all() and (buf[ends - len(_RECORD_CLOSE) - 1] == 125).all())
    )
    if not ok or (type_at - ids_at > MAX_ID_SECTION).any():
        raise _NotCanonical
    codes = _type_codes(buf, type_at + len(_TYPE_KEY), data_at)
    return _Lines(buf, data, starts, ends, ts_at, ids_at, type_at, data_at, codes)


def _parse_chunk(chunk: bytearray, size: int) -> _Part | None:
    """The columns of ``chunk[:size]`` (see ``_locate``)."""
    lines = _locate(chunk, size)
    if lines is None:
        return None
    buf, data, starts, ends = lines.buf, lines.data, lines.starts, lines.ends
    ts_at, ids_at, type_at, data_at, codes = lines.ts_at, lines.ids_at, lines.type_at, lines.data_at, lines.codes
    n = len(ends)
    seq = _integers(buf, starts + len(_SEQ_KEY), ts_at)
    try:
        # Via a plain string array: casting string views to numbers is several times slower.
        ts = pc.cast(_views(buf, data, ts_at + len(_TS_KEY), ids_at).cast(pa.string()), pa.float64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _NotCanonical from None
    ids = pc.dictionary_encode(_views(buf, data, ids_at, type_at))
    # A payload line for Arrow is the data object then the record's closing brace, blanked to a
    # space, then the newline: "{...} \n". The json slices stop before that brace.
    buf[ends - 1] = 32
    tables, json_rows, payloads = _payloads(chunk, buf, data, codes, data_at + len(_DATA_KEY), ends - 1)
    pieces = _pivot(json_rows, payloads, codes[json_rows])  # here, so parallel chunks share this Python work
    id_texts = ids.dictionary.to_pylist()
    return _Part(n, seq, ts, id_texts, _id_fields(id_texts), ids.indices.to_numpy(), codes, tables, pieces)


def _id_fields(texts: list[bytes]) -> list[dict[str, Any]]:
    """The id fields of canonical id sections (``,"session_id":...,"agent_id":...``), parsed with
    one json call for the chunk: a turn has its own section, and a call per turn was a sixth of
    the time on a tool-heavy journal."""
    if not all(text.startswith(_ID_SECTION_START) for text in texts):
        raise _NotCanonical
    try:
        parsed = json.loads(b"[{" + b"},{".join(text[1:] for text in texts) + b"}]")
    except ValueError:
        raise _NotCanonical from None
    if len(parsed) != len(texts) or any(tuple(fields) != _GROUP_FIELDS for fields in parsed):
        raise _NotCanonical  # an id held a comma (or a key was not where the layout puts it)
    for fields in parsed:
        fields["parent_agent_id"] = None
    return parsed


_TYPE_WORDS = (MAX_TYPE_NAME - 8) // 8  # words read from a name's start; its last eight bytes are one more
_TYPE_MIX = np.asarray([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93, 0x27D4EB2F165667C5, 0x85EBCA77C2B2AE63][: _TYPE_WORDS + 2], np.uint64)


def _type_key(name: bytes) -> list[int]:
    """The words that identify a type name in a canonical line (see ``_type_codes``)."""
    line = _TYPE_KEY + name + _DATA_KEY + bytes(8 * _TYPE_WORDS)
    at, size = len(_TYPE_KEY), len(name)
    words = [int.from_bytes(line[at + 8 * k : at + 8 * k + 8], "little") if _fixed_word(k, size) else 0 for k in range(_TYPE_WORDS)]
    return [size, *words, int.from_bytes(line[at + size - 8 : at + size], "little")]


def _fixed_word(k: Any, size: Any) -> Any:
    """Whether the ``k``-th word from a name's start lies within the fixed text (name, then DATA_KEY)."""
    return 8 * k + 8 <= size + len(_DATA_KEY)


def _type_hash(keys: np.ndarray) -> np.ndarray:
    """Mixes type keys (rows of uint64 words) into one uint64 each; the products wrap around."""
    return (keys * _TYPE_MIX).sum(axis=1, dtype=np.uint64)


# A name beyond the limit is left out here (its journals take the json path, and a test in
# tests/test_journal_fast_path.py fails), so slots map back to EVENT_TYPES codes.
_TYPE_SLOT_CODES = np.asarray([code for code, name in enumerate(EVENT_TYPES) if len(name) <= MAX_TYPE_NAME], np.int16)
_TYPE_KEYS = np.asarray([_type_key(EVENT_TYPES[code].encode()) for code in _TYPE_SLOT_CODES.tolist()], np.uint64)
_TYPE_HASHES = _type_hash(_TYPE_KEYS)
_TYPE_ORDER = np.argsort(_TYPE_HASHES)
assert len(set(_TYPE_HASHES.tolist())) == len(_TYPE_KEYS), "two event types share a hash"


def _type_codes(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The type of each line, as int16 indices into ``EVENT_TYPES``, read without decoding text.

    The bytes around a canonical type name are fixed (``TYPE_KEY`` before, ``DATA_KEY`` after),
    so the eight-byte words from the name's start, with the word that ends where it ends and its
    length, identify it exactly (for names up to ``MAX_TYPE_NAME`` bytes; ``format`` checks the
    vocabulary fits). Each line's key is looked up by hash among the vocabulary's, then compared
    word for word: an unknown type is not canonical (the json path names it).
    """
    words = _words(buf, "<u8")
    size = end - begin
    if not len(size) or size.min() < 1 or size.max() > MAX_TYPE_NAME:
        raise _NotCanonical
    keys = np.empty((len(size), _TYPE_WORDS + 2), np.uint64)
    keys[:, 0] = size
    for k in range(_TYPE_WORDS):
        keys[:, k + 1] = np.where(_fixed_word(k, size), words[begin + 8 * k], np.uint64(0))
    keys[:, -1] = words[end - 8]
    hashes = _type_hash(keys)
    slot = _TYPE_ORDER[np.minimum(np.searchsorted(_TYPE_HASHES, hashes, sorter=_TYPE_ORDER), len(_TYPE_ORDER) - 1)]
    if not (_TYPE_KEYS[slot] == keys).all():
        raise _NotCanonical
    return _TYPE_SLOT_CODES[slot]


def _integers(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The non-negative decimal integers at ``[begin, end)`` of each line (up to 18 digits)."""
    size = end - begin
    if not len(size) or size.min() < 1 or size.max() > MAX_SEQ_DIGITS:
        raise _NotCanonical
    value = np.zeros(len(begin), np.int64)
    for k in range(int(size.max())):
        digit = buf[begin + k].astype(np.int64) - 48
        inside = k < size
        if ((digit < 0) | (digit > 9))[inside].any():
            raise _NotCanonical
        value = np.where(inside, value * 10 + digit, value)
    return value


def _payloads(
    chunk: bytearray,
    buf: np.ndarray,
    data: pa.Buffer,
    codes: np.ndarray,
    begin: np.ndarray,
    end: np.ndarray,
) -> tuple[list[tuple[np.ndarray, pa.Table]], np.ndarray, list[dict[str, Any]]]:
    """The payloads: plain strings read in place, Arrow tables for the flat payloads of frequent
    types, json for the rest.

    Flat is decided per row, before any parser runs: a payload whose only ``{`` is its own and
    that holds no ``[`` has scalar values only (a bracket inside a string just sends its row to
    json). Most types mix both (a ``tool_start`` has scalar ids and nested ``arguments``); giving
    Arrow only flat rows keeps it from parsing rows whose table would be thrown away.
    """
    counts = np.bincount(codes, minlength=len(EVENT_TYPES))
    tables: list[tuple[np.ndarray, pa.Table]] = []
    slow: list[np.ndarray] = [np.flatnonzero(counts[codes] < _ARROW_MIN_ROWS)]
    frequent = np.flatnonzero(counts >= _ARROW_MIN_ROWS).tolist()
    nested = _nested_rows(buf, begin, end) if frequent else None
    for code in frequent:
        local = np.flatnonzero(codes == code)
        plain = _plain_strings(buf, begin[local], end[local])
        if plain is not None:
            key, ok, values = plain
            tables.append((local[ok], pa.table({key: values})))
            local = local[~ok]
            if not len(local):
                continue
        assert nested is not None
        flat = ~nested[local] & (end[local] - begin[local] <= _MAX_FAST_PAYLOAD)
        table = _arrow_table(buf, data, begin[local[flat]], end[local[flat]]) if flat.sum() >= _ARROW_MIN_ROWS else None
        if table is None:
            slow.append(local)
        else:
            tables.append((local[flat], table))
            slow.append(local[~flat])
    rows = np.sort(np.concatenate(slow))
    if not len(rows):
        return tables, rows, []
    # One json.loads over a JSON array of the payloads: the per-call overhead dominates otherwise.
    view = memoryview(chunk)
    joined = b",".join([view[b:e] for b, e in zip(begin[rows].tolist(), end[rows].tolist())])
    try:
        payloads = json.loads(b"[" + joined + b"]")
    except ValueError:
        raise _NotCanonical from None
    if len(payloads) != len(rows) or set(map(type, payloads)) != {dict}:
        raise _NotCanonical
    return tables, rows, payloads


def _nested_rows(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each payload ``[begin, end)``, whether it holds a ``{`` after its first byte or a ``[``."""
    opens = np.flatnonzero((buf == 123) | (buf == 91))  # "{" and "[": a pass over the chunk, in C
    return np.searchsorted(opens, end) - np.searchsorted(opens, begin) > 1


def _plain_strings(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple[str, np.ndarray, pa.Array] | None:
    """Payloads of the shape ``{"key":"text"}`` whose text holds no quote, escape or non-ASCII byte.

    That is most per-token deltas, and for them the text is the raw bytes (the writer escapes
    every non-ASCII character), so the bytes are gathered straight into an Arrow string array,
    with no JSON parser. Returns the key, which rows have that shape, and their texts; None when
    the first payload is not of it.
    """
    first = bytes(buf[begin[0] : end[0]])
    close = first.find(_STRING_KEY_END, len(_STRING_OPEN))
    if not first.startswith(_STRING_OPEN) or close < 0:
        return None
    prefix = first[: close + len(_STRING_KEY_END)]
    key = prefix[len(_STRING_OPEN) : -len(_STRING_KEY_END)]
    if b'"' in key or b"\\" in key:
        return None
    body_begin, body_end = begin + len(prefix), end - len(_STRING_CLOSE)
    ok = body_end >= body_begin
    ok &= _matches_each(buf, body_end, _STRING_CLOSE)  # the text's closing quote, then "}"
    ok &= _matches_each(buf, begin, prefix)
    # Gather every candidate's text into one buffer; a quote, backslash, control or non-ASCII
    # byte in a text rules its row out (a quote there means more keys follow).
    size = np.where(ok, body_end - body_begin, 0)
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    text = buf[np.repeat(body_begin - offsets[:-1], size) + np.arange(offsets[-1])]
    odd = np.flatnonzero((text == 34) | (text == 92) | (text < 32) | (text > 126))
    ok[np.searchsorted(offsets, odd, side="right") - 1] = False
    if not ok.any():
        return None
    texts = pa.Array.from_buffers(pa.large_string(), len(size), [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    return key.decode(), ok, texts if ok.all() else texts.filter(pa.array(ok))


def _arrow_table(buf: np.ndarray, data: pa.Buffer, begin: np.ndarray, end: np.ndarray) -> pa.Table | None:
    """The payloads of one type as an Arrow table, or None when json must parse them."""
    lines = _views(buf, data, begin, end + 2).cast(pa.string())  # "{...} \n" each, packed
    offsets = lines.buffers()[1]
    first, last = np.frombuffer(offsets, np.int32)[[lines.offset, lines.offset + len(lines)]]
    try:
        # Chunks already parse in parallel: Arrow's own threads would only compete with them.
        table = pa_json.read_json(
            pa.BufferReader(lines.buffers()[2][int(first) : int(last)]),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, int(last - first) + 1)),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(begin):
        return None
    if not all(any(test(f.type) for test in _FLAT_ARROW) for f in table.schema):
        return None  # nested values: Arrow would merge their keys, json keeps them exact
    return table


_KINDS = {bool: "bool", int: "int", float: "float", str: "str"}


def data_kind(values: Sequence[Any]) -> str:
    """The column kind of Python JSON values: ``bool``, ``int``, ``float``, ``str`` or ``object``.

    Missing values (None) do not count; only None gives ``null``.
    """
    types = set(map(type, values))  # one pass in C
    types.discard(type(None))
    kinds = {_KINDS.get(t, "object") for t in types}
    if not kinds:
        return "null"
    if kinds == {"int", "float"}:
        return "float"
    return kinds.pop() if len(kinds) == 1 else "object"


def arrow_kind(array: pa.Array) -> str:
    """The column kind of an Arrow array parsed from JSON (see ``data_kind``)."""
    kind = array.type
    if pa.types.is_boolean(kind):
        return "bool"
    if pa.types.is_int64(kind):
        return "int"
    if pa.types.is_float64(kind):
        return "float"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "str"
    if pa.types.is_null(kind):
        return "null"
    return "object"
