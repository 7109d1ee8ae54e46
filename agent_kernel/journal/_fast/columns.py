"""journal.columns — events as columns (NumPy and Arrow arrays), built from events or read from a file.

``frames.events_df`` is built from an ``EventColumns``. Three builders produce one:

* ``columns_from_events`` walks a list of events (or event dicts): the path for a live agent.
* ``columns_from_file`` reads a journal file written by ``Journal``. Every record there has the one
  layout ``journal.format`` states, so chunks of the file are parsed with vectorised byte
  operations instead of a JSON parser per line (``line_scan`` finds the fields, ``chunk_columns``
  turns a chunk into columns), on every core, while the garbage collector is paused
  (``paused_gc``).
* A file with any line in another layout (re-serialised by another tool, edited by hand, with a
  damaged line) is read by DuckDB's JSON reader instead (``any_layout``), giving the same
  columns; DuckDB is imported only then.

Data values become columns by kind (see ``data_pieces.data_kind``): booleans, integers, numbers and
strings get typed columns; objects, arrays and mixed values stay Python objects, exactly as
``json.loads`` returns them. Arrow is used for payloads only when the inferred schema is flat,
because Arrow merges differently-keyed objects into one struct and would invent keys.

Figures: ``benchmarks/journal.py`` (four kinds of 1,000,000-event journal). The payloads with
nested values (arguments, messages, tool results echoed in ``recursion``) go through ``json``,
which holds the GIL; everything else releases it, so the chunks of a journal parse on two cores
at once.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from agent_kernel.errors import JournalError
from agent_kernel.events._event import AgentEvent
from agent_kernel.journal._fast.chunk_columns import Part, Shapes, parse_chunk
from agent_kernel.journal._fast.data_pieces import DataPiece, pivot
from agent_kernel.journal._fast.line_scan import EVENT_TYPES, NotCanonical, blocks, complete_tail, locate, padded
from agent_kernel.journal._format import GROUP_FIELDS
from agent_kernel.journal._reader import LineCount, check_schema, iter_records, read_header

ID_FIELDS = ("session_id", "run_id", "turn_id", "parent_turn_id", "agent_id")
_ROW_GROUP_FIELDS = (*GROUP_FIELDS, "parent_agent_id")
_TYPE_CODE = {name: code for code, name in enumerate(EVENT_TYPES)}
_ENVELOPE = itemgetter("seq", "ts", "type", "data")
_IDS = itemgetter(*GROUP_FIELDS)


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
        self.unknown: Counter[str] = Counter()  # events of types this version does not know, left out

    def group_of(self, key: Any, fields: dict[str, Any]) -> int:
        code = self.group_index.get(key)
        if code is None:
            code = self.group_index[key] = len(self.groups)
            self.groups.append(fields)
        return code

    def add_rows(self, rows: np.ndarray, payloads: list[Any], kinds: np.ndarray | None = None) -> None:
        """Adds data dicts for ``rows`` (global row numbers), one piece per key and key set."""
        for key, pieces in pivot(rows, payloads, kinds).items():
            self.data.setdefault(key, []).extend(pieces)

    def add_envelope(self, seq: np.ndarray, ts: np.ndarray, group: np.ndarray, type_code: np.ndarray) -> None:
        self.seq.append(seq)
        self.ts.append(ts)
        self.group.append(group)
        self.type_code.append(type_code)
        self.length += len(seq)

    def merge(self, part: Part | None) -> None:
        """Appends one chunk's columns after those merged so far."""
        if part is None:
            return
        base = self.length
        index = self.group_index
        mapping = np.asarray(
            [index[text] if text in index else self.group_of(text, fields) for text, fields in zip(part.id_texts, part.id_fields)],
            np.int64,
        )
        self.add_envelope(part.seq, part.ts, mapping[part.id_codes], part.type_code)
        for rows, table in part.tables:
            for name in table.column_names:
                self.data.setdefault(name, []).append(DataPiece(rows + base, table.column(name).combine_chunks()))
        for key, pieces in part.json_pieces.items():
            self.data.setdefault(key, []).extend(DataPiece(piece.rows + base, piece.values) for piece in pieces)

    def add_records(self, records: list[Any]) -> None:
        """Appends event records (``AgentEvent.to_dict()`` dicts, as ``json`` reads them from a file).

        The fields of all records are taken with one ``itemgetter`` call each and transposed with
        ``zip``: C loops rather than a Python step per record and field, which is what most of a
        re-serialised journal's time went to after ``json`` (benchmarks/journal.py). Records that
        lack a field, or are not dicts, go through ``add_events``.
        """
        if set(map(type, records)) - {dict}:
            self.add_events(records)
            return
        try:
            envelopes = list(map(_ENVELOPE, records))
            ids = list(map(_IDS, records))
        except KeyError:
            self.add_events(records)
            return
        if not envelopes:
            return
        seqs, times, kinds, payloads = zip(*envelopes)
        codes = list(map(_TYPE_CODE.get, map(str, kinds)))
        if None in codes:  # a newer version's events: left out of the columns, and counted
            known = [i for i, code in enumerate(codes) if code is not None]
            self.unknown.update(str(kinds[i]) for i, code in enumerate(codes) if code is None)
            records = [records[i] for i in known]
            if not records:
                return
            seqs, times, kinds, payloads = zip(*(envelopes[i] for i in known))
            ids = [ids[i] for i in known]
            codes = [codes[i] for i in known]
        n = len(records)
        parents = [record.get("parent_agent_id") for record in records]  # never in a file; kept like add_events
        keys = list(zip(ids, parents))
        index = self.group_index
        for key in dict.fromkeys(keys):
            if key not in index:
                self.group_of(key, {**dict(zip(GROUP_FIELDS, key[0])), "parent_agent_id": key[1]})
        type_code = np.asarray(codes, np.int16)
        rows = np.arange(self.length, self.length + n, dtype=np.int64)
        group = np.fromiter(map(index.__getitem__, keys), np.int64, n)
        self.add_envelope(np.fromiter(map(int, seqs), np.int64, n), np.fromiter(map(float, times), np.float64, n), group, type_code)
        self.add_rows(rows, [payload or {} for payload in payloads], type_code)

    def add_events(self, events: Iterable[AgentEvent | dict[str, Any]]) -> None:
        """Appends ``AgentEvent`` objects or event dicts, one at a time."""
        seq: list[int] = []
        ts: list[float] = []
        group: list[int] = []
        type_code: list[int] = []
        payloads: list[Any] = []
        for record in events:
            ids = tuple(_field(record, name) for name in _ROW_GROUP_FIELDS)
            code = self.group_index.get(ids)
            if code is None:
                code = self.group_of(ids, dict(zip(_ROW_GROUP_FIELDS, ids)))
            kind = _field(record, "type")
            code_of_type = _TYPE_CODE.get(str(kind))
            if code_of_type is None:  # a newer version's event: left out, and counted
                self.unknown[str(kind)] += 1
                continue
            type_code.append(code_of_type)
            seq.append(int(_field(record, "seq")))
            ts.append(float(_field(record, "ts")))
            group.append(code)
            payloads.append(_field(record, "data") or {})
        rows = np.arange(self.length, self.length + len(seq), dtype=np.int64)
        self.add_envelope(np.asarray(seq, np.int64), np.asarray(ts, np.float64), np.asarray(group, np.int64), np.asarray(type_code, np.int16))
        self.add_rows(rows, payloads)

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
    builder.add_events(events)
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


# NumPy's switch for asking Linux for transparent huge pages on large arrays (NumPy >= 1.20;
# None where it is missing, and then nothing is switched).
_set_huge_pages: Callable[[bool], bool] | None = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "_set_madvise_hugepage", None)


_pages_lock = threading.Lock()
_pages_users = 0  # builds under way; the first switches huge pages off, the last puts them back
_pages_before = True


@contextmanager
def small_pages() -> Iterator[None]:
    """Stops NumPy from asking for transparent huge pages while a journal's columns are built.

    Linux, as it is usually set up (``defrag=madvise``), compacts memory on the first touch of a
    huge page NumPy asked for: filling the full-length columns of a 1,000,000-event frame then
    took twice the time in the kernel that it took in Python (benchmarks/journal.py). The
    columns are written once, front to back, so ordinary pages lose nothing. The switch is
    process-wide; it is put back as it was when the last build under way ends.
    """
    global _pages_users, _pages_before
    if _set_huge_pages is None:
        yield
        return
    with _pages_lock:
        if _pages_users == 0:
            _pages_before = _set_huge_pages(False)
        _pages_users += 1
    try:
        yield
    finally:
        with _pages_lock:
            _pages_users -= 1
            if _pages_users == 0:
                _set_huge_pages(_pages_before)


def columns_from_file(path: str | os.PathLike[str]) -> EventColumns:
    """Columns of the journal at ``path``: the fast path for canonical files, DuckDB otherwise.

    A torn last line is skipped with a ``TornLineWarning``; damaged lines and events of unknown
    types are left out with a ``SkippedLinesWarning`` counting them (``journal.reader``).
    """
    with paused_gc():
        return _columns_from_file(Path(path))


def _columns_from_file(path: Path) -> EventColumns:
    check_schema(read_header(path), path)
    try:
        return _read_canonical(path)
    except NotCanonical:
        pass
    from agent_kernel.journal._fast import any_layout  # imports DuckDB, which only this path needs

    try:
        return any_layout.read_columns(path, stacklevel=4)  # events_df's caller
    except any_layout.PlainReaderNeeded:
        records, count = _plain_records(path)
        builder = _Builder()
        builder.add_records(records)
        count.unknown_types = builder.unknown
        count.warn(path, stacklevel=4)
        return builder.finish()


def _plain_records(path: Path, skip_types: Iterable[str] = ()) -> tuple[list[Any], LineCount]:
    """The event records of ``path`` read line by line with ``json`` (``reader.iter_records``), for
    the rare file DuckDB's reader refuses a record of; the damaged lines counted, not yet warned."""
    count = LineCount()
    skipped = set(map(str, skip_types))
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    records = [record for record in iter_records(lines, path, count, stacklevel=5) if record["type"] not in skipped]
    count.unknown_types.clear()  # the caller counts the unknown types its own way
    return records, count


def _read_canonical(path: Path) -> EventColumns:
    if sys.byteorder != "little":  # the byte tricks of line_scan read words in little-endian order
        raise NotCanonical
    builder = _Builder()
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None
    # NumPy and Arrow release the GIL for most of a chunk's work, so chunks parse in worker
    # threads, one per core, while this one reads ahead and merges them in file order (at most
    # a few are in memory at once; merging is mostly waiting).
    workers = worker_threads()
    shapes = Shapes()
    spare: list[bytearray] = []  # buffers of merged chunks, filled again (see line_scan.blocks)
    with f, ThreadPoolExecutor(workers, thread_name_prefix="journal-read") as pool:
        pending: deque[tuple[bytearray, Future[Part | None]]] = deque()
        tail = b""
        for block, size in blocks(f, spare):
            if size < 0:
                tail = bytes(block)
                break
            pending.append((block, pool.submit(parse_chunk, block, size, shapes)))
            while len(pending) > workers:
                done, part = pending.popleft()
                builder.merge(part.result())  # a Part holds copies, never views of its chunk
                spare.append(done)
        while pending:
            builder.merge(pending.popleft()[1].result())
    if complete_tail(tail, path, stacklevel=5):
        builder.merge(parse_chunk(*padded(tail), shapes))
    return builder.finish()


def worker_threads() -> int:
    """Worker threads for the parallel parts of reading: one per usable core, at most four."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def records_from_file(path: str | os.PathLike[str], skip_types: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The event records of a journal as dicts, leaving out ``skip_types``.

    On a canonical file the types are found column-wise, so only the records kept are parsed:
    the per-token deltas, nine in ten lines of a long session, cost next to nothing. Other files
    are read by DuckDB (``any_layout``). A torn last line is skipped with a ``TornLineWarning``,
    damaged lines with a ``SkippedLinesWarning``; events of unknown types are kept, for the
    caller to count.
    """
    check_schema(read_header(path), path)
    skip = np.asarray(sorted(_TYPE_CODE[str(kind)] for kind in skip_types), np.int16)
    with paused_gc():
        try:
            return _canonical_records(Path(path), skip)
        except NotCanonical:
            pass
        from agent_kernel.journal._fast import any_layout

        try:
            return any_layout.read_records(Path(path), skip_types, stacklevel=4)  # the caller of turns_df and the other frames
        except any_layout.PlainReaderNeeded:
            records, count = _plain_records(Path(path), skip_types)
            count.warn(path, stacklevel=4)
            return records


def _canonical_records(path: Path, skip: np.ndarray) -> list[dict[str, Any]]:
    if sys.byteorder != "little":
        raise NotCanonical
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise JournalError(f"no journal at {path}; check the path, or list sessions with list_sessions().") from None
    records: list[dict[str, Any]] = []
    with f:
        for block, size in blocks(f):
            if size < 0:
                if complete_tail(bytes(block), path, stacklevel=5):
                    records.extend(_kept_records(*padded(bytes(block)), skip))
                break
            records.extend(_kept_records(block, size, skip))
    return records


def _kept_records(chunk: bytearray, size: int, skip: np.ndarray) -> list[dict[str, Any]]:
    lines = locate(chunk, size)
    if lines is None:
        return []
    keep = np.flatnonzero(~np.isin(lines.codes, skip))
    view = memoryview(chunk)
    joined = b",".join([view[b:e] for b, e in zip(lines.starts[keep].tolist(), lines.ends[keep].tolist())])
    try:
        records = json.loads(b"[" + joined + b"]")
    except ValueError:
        raise NotCanonical from None
    if len(records) != len(keep):
        raise NotCanonical
    return records

