"""journal.columns — events as columns (NumPy and Arrow arrays), read fast from a journal file.

``frames.events_df`` is built from an ``EventColumns``. Two builders produce one:

* ``columns_from_events`` walks a list of events (or event dicts): the path for a live agent.
* ``columns_from_file`` reads a journal file written by ``Journal``. Every record there has one
  canonical shape (compact separators, ASCII, keys in a fixed order with ``data`` last), so the
  envelope of a million lines is located and parsed with vectorised NumPy byte operations instead
  of a JSON parser per line: the ids that repeat on every line of a turn are parsed once per turn,
  ``seq`` and ``ts`` are parsed column-wise, and the payloads of the frequent event types (the
  per-token deltas) go to Arrow's JSON reader in one buffer per type. Rare types are parsed with
  ``json``. A file with any line in another shape (edited by hand, written by another tool) is
  read entirely through ``json`` instead, giving the same columns, only slower.

Data values become columns by kind (see ``data_kind``): booleans, integers, numbers and strings
get typed columns; objects, arrays and mixed values stay Python objects, exactly as ``json.loads``
returns them. Arrow is used for payloads only when the inferred schema is flat, because Arrow
merges differently-keyed objects into one struct and would invent keys.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ..errors import JournalError
from ..events import AgentEvent, EventType
from .reader import TornLineWarning, parse_header, read_records

__all__ = ["EVENT_TYPES", "ID_FIELDS", "DataPiece", "EventColumns", "columns_from_events", "columns_from_file"]

EVENT_TYPES: tuple[str, ...] = tuple(kind.value for kind in EventType)
ID_FIELDS = ("session_id", "run_id", "turn_id", "parent_turn_id", "agent_id")
_GROUP_FIELDS = ("session_id", "run_id", "turn_id", "parent_turn_id", "iteration", "agent_id")
_TYPE_CODE = {name: code for code, name in enumerate(EVENT_TYPES)}
_CHUNK = 16 << 20  # bytes read and parsed at a time: bounds the working memory
_ARROW_MIN_ROWS = 512  # below this a type's payloads are parsed with json
_FLAT_ARROW = (pa.types.is_boolean, pa.types.is_int64, pa.types.is_float64, pa.types.is_string, pa.types.is_null)

Values = Union[pa.Array, list]


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
        """Adds data dicts for ``rows`` (global row numbers), one piece per key."""
        keys: dict[str, tuple[list[int], list[Any]]] = {}
        for row, payload in zip(rows.tolist(), payloads):
            for key, value in payload.items():
                slot = keys.get(key)
                if slot is None:
                    slot = keys[key] = ([], [])
                slot[0].append(row)
                slot[1].append(value)
        for key, (where, values) in keys.items():
            self.data.setdefault(key, []).append(DataPiece(np.asarray(where, np.int64), values))

    def add_table(self, rows: np.ndarray, table: pa.Table) -> None:
        for name in table.column_names:
            column = table.column(name).combine_chunks()
            if column.null_count == len(column):
                continue  # a key missing on every row of this type
            self.data.setdefault(name, []).append(DataPiece(rows, column))

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


def columns_from_file(path: str | os.PathLike[str]) -> EventColumns:
    """Columns of the journal at ``path``: the fast path for canonical files, json otherwise.

    A torn last line is skipped with a ``TornLineWarning``.
    """
    try:
        return _read_canonical(Path(path))
    except _NotCanonical:
        _, records = read_records(path)
        return columns_from_events(records)


def _read_canonical(path: Path) -> EventColumns:
    builder = _Builder()
    reader = _ChunkParser(builder)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None
    with f:
        first = f.readline()
        carry = first if parse_header(first) is None else b""
        while True:
            # One buffer per chunk: the carried partial line, the new bytes, then zero padding that
            # fixed-width windows may read past the last line.
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
                reader.parse(block, cut)
    if carry.strip():
        try:
            json.loads(carry)
        except ValueError:
            warnings.warn(
                TornLineWarning(
                    f"{path}: skipped a torn last line ({len(carry)} bytes), left by a crash mid-write; "
                    "every complete record before it was read."
                ),
                stacklevel=4,
            )
        else:
            reader.parse(bytearray(carry + b"\n" + bytes(_PAD)), len(carry) + 1)
    return builder.finish()


_PAD = 2048  # zero bytes after a chunk, so a fixed-width window never runs past the buffer
_MAX_IDS = _PAD  # longest id section read on the fast path
_MAX_FAST_PAYLOAD = 256  # longer payloads of a frequent type are parsed with json


def _windows(buf: np.ndarray, width: int) -> np.ndarray:
    return np.lib.stride_tricks.sliding_window_view(buf, width)


def _matches(buf: np.ndarray, positions: np.ndarray, pattern: bytes) -> bool:
    """True if every one of ``positions`` starts an occurrence of ``pattern`` in ``buf``."""
    expected = np.frombuffer(pattern, np.uint8)
    return bool((_windows(buf, len(pattern))[positions] == expected).all())


def _ragged(buf: np.ndarray, begin: np.ndarray, end: np.ndarray, separator: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The byte ranges ``[begin, end)`` packed end to end (each followed by ``separator`` if given).

    Returns the packed bytes and int32 offsets (n + 1), ready for an Arrow string array.
    """
    length = end - begin
    extra = 0 if separator is None else 1
    width = max(1, int(length.max()) + extra if len(length) else 1)
    rows = _windows(buf, width)[begin]
    keep = np.arange(width) < (length + extra)[:, None]
    if separator is not None:
        rows[np.arange(len(begin)), length] = separator
    offsets = np.zeros(len(begin) + 1, np.int32)
    np.cumsum(length + extra, out=offsets[1:])
    return rows[keep], offsets


def _strings(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> pa.StringArray:
    packed, offsets = _ragged(buf, begin, end)
    return pa.StringArray.from_buffers(len(begin), pa.py_buffer(offsets), pa.py_buffer(packed))


class _ChunkParser:
    """Parses chunks of whole canonical lines into a ``_Builder``.

    A canonical line has exactly eight top-level commas before its payload: after ``seq``,
    ``ts`` and each id field, before ``type`` and before ``data`` (ids never hold a comma in
    practice; one that does sends the file to the json path). So every field boundary is found by
    indexing the sorted comma positions, and verified against the expected key text.
    """

    def __init__(self, builder: _Builder) -> None:
        self.builder = builder

    def parse(self, chunk: bytearray, size: int) -> None:
        """Parses ``chunk[:size]``, whole lines followed by at least ``_PAD`` zero bytes."""
        buf = np.frombuffer(chunk, np.uint8)
        ends = np.flatnonzero(buf[:size] == 10)
        n = len(ends)
        if n == 0:
            return
        starts = np.empty(n, np.int64)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        commas = np.flatnonzero(buf[:size] == 44)
        first = np.searchsorted(commas, starts)
        if (ends - starts < 60).any() or (first + 8 >= len(commas)).any():
            raise _NotCanonical
        ts_at, ids_at, type_at = commas[first], commas[first + 1], commas[first + 7]
        data_at = commas[first + 8] - 1
        if (data_at >= ends).any():
            raise _NotCanonical
        ok = (
            _matches(buf, starts, b'{"seq":')
            and _matches(buf, ts_at, b',"ts":')
            and _matches(buf, ids_at, b',"session_id":')
            and _matches(buf, type_at, b',"type":"')
            and _matches(buf, data_at, b'","data":')
            and bool((buf[ends - 2] == 125).all() and (buf[ends - 1] == 125).all())  # "}}"
        )
        if not ok or (type_at - ids_at > _MAX_IDS).any():
            raise _NotCanonical
        try:
            seq = pc.cast(_strings(buf, starts + 7, ts_at), pa.int64()).to_numpy()
            ts = pc.cast(_strings(buf, ts_at + 6, ids_at), pa.float64()).to_numpy()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise _NotCanonical from None
        groups = self._groups(pc.dictionary_encode(_strings(buf, ids_at, type_at)))
        codes = self._types(pc.dictionary_encode(_strings(buf, type_at + 9, data_at)))
        base = self.builder.length
        self.builder.seq.append(seq)
        self.builder.ts.append(ts)
        self.builder.group.append(groups)
        self.builder.type_code.append(codes)
        self.builder.length += n
        self._payloads(chunk, buf, codes, data_at + 9, ends - 1, base)

    def _groups(self, encoded: pa.DictionaryArray) -> np.ndarray:
        """Group codes: the id section repeats on every line of a turn, so each is parsed once."""
        mapping = np.asarray([self._group(text.encode()) for text in encoded.dictionary.to_pylist()], np.int64)
        return mapping[encoded.indices.to_numpy()]

    def _group(self, text: bytes) -> int:
        code = self.builder.group_index.get(text)
        if code is not None:
            return code
        try:
            fields = json.loads(b"{" + text[1:] + b"}")
        except ValueError:
            raise _NotCanonical from None
        if list(fields) != list(_GROUP_FIELDS):
            raise _NotCanonical
        fields["parent_agent_id"] = None
        return self.builder.group_of(text, fields)

    @staticmethod
    def _types(encoded: pa.DictionaryArray) -> np.ndarray:
        try:
            mapping = np.asarray([_TYPE_CODE[name] for name in encoded.dictionary.to_pylist()], np.int16)
        except KeyError:
            raise _NotCanonical from None  # an unknown type: the json path names it
        return mapping[encoded.indices.to_numpy()]

    def _payloads(
        self, chunk: bytearray, buf: np.ndarray, codes: np.ndarray, begin: np.ndarray, end: np.ndarray, base: int
    ) -> None:
        counts = np.bincount(codes, minlength=len(EVENT_TYPES))
        small: list[np.ndarray] = []
        for code in np.flatnonzero(counts >= _ARROW_MIN_ROWS).tolist():
            local = np.flatnonzero(codes == code)
            short = end[local] - begin[local] <= _MAX_FAST_PAYLOAD
            fast, slow = local[short], local[~short]
            table = self._arrow_table(buf, begin[fast], end[fast]) if len(fast) else None
            if table is None:
                small.append(local)
            else:
                self.builder.add_table(fast + base, table)
                small.append(slow)
        rare = np.flatnonzero(counts[codes] < _ARROW_MIN_ROWS)
        small.append(rare)
        local = np.sort(np.concatenate(small))
        if not len(local):
            return
        # One json.loads over a JSON array of the payloads: the per-call overhead dominates otherwise.
        view = memoryview(chunk)
        joined = b",".join([view[b:e] for b, e in zip(begin[local].tolist(), end[local].tolist())])
        try:
            payloads = json.loads(b"[" + joined + b"]")
        except ValueError:
            raise _NotCanonical from None
        if len(payloads) != len(local) or not all(isinstance(p, dict) for p in payloads):
            raise _NotCanonical
        self.builder.add_rows(local + base, payloads)

    @staticmethod
    def _arrow_table(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> pa.Table | None:
        """The payloads of one type as an Arrow table, or None when json must parse them."""
        packed, _ = _ragged(buf, begin, end, separator=10)
        try:
            table = pa_json.read_json(pa.BufferReader(packed.tobytes()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(begin):
            return None
        if not all(any(test(f.type) for test in _FLAT_ARROW) for f in table.schema):
            return None  # nested values: Arrow would merge their keys, json keeps them exact
        return table


def data_kind(values: Sequence[Any]) -> str:
    """The column kind of Python JSON values: ``bool``, ``int``, ``float``, ``str`` or ``object``.

    Missing values (None) do not count; only None gives ``null``.
    """
    kinds = set()
    for value in values:
        if value is None:
            continue
        kind = type(value)
        if kind is bool:
            kinds.add("bool")
        elif kind is int:
            kinds.add("int")
        elif kind is float:
            kinds.add("float")
        elif kind is str:
            kinds.add("str")
        else:
            return "object"
        if len(kinds) > 1 and kinds != {"int", "float"}:
            return "object"
    if not kinds:
        return "null"
    if kinds == {"int", "float"}:
        return "float"
    return kinds.pop()


def arrow_kind(array: pa.Array) -> str:
    """The column kind of an Arrow array parsed from JSON (see ``data_kind``)."""
    kind = array.type
    if pa.types.is_boolean(kind):
        return "bool"
    if pa.types.is_int64(kind):
        return "int"
    if pa.types.is_float64(kind):
        return "float"
    if pa.types.is_string(kind):
        return "str"
    if pa.types.is_null(kind):
        return "null"
    return "object"
