"""journal.any_layout — a journal in any JSON layout, read with DuckDB's JSON reader: columns and records.

The fast reader (``columns``) relies on the writer's byte layout (``journal.format``). A journal
another tool re-serialised (other spacing or key order, non-ASCII kept as it is), or one edited
by hand, is read here instead, through the ``read_json`` call every DuckDB reader of journals
makes (``reader.read_json_sql``): the envelope into typed columns, and ``data`` as a map from each
key to its value's JSON text. No value's type is declared or guessed, because a frame's column
dtype follows the values it holds (``frames.events_df``): a string value comes back unescaped,
as Arrow strings, and every other value is parsed from its text by ``json``, as the plain reader
parses it, so big integers, NaN and nested values come out as they do on the other paths. DuckDB
parses every line and unescapes the strings on its own threads; Python parses only the numbers,
booleans and nested values, one ``json.loads`` per data key.

Lines follow ``journal.reader``'s policy. A blank line is no record. A line DuckDB cannot read
comes back as a row of NULLs and is counted as damaged (its number is found in the file), but
for a torn last line, which is skipped with a ``TornLineWarning``. Events of unknown types are
counted: the columns leave them out, the records keep them. A line DuckDB refuses that ``json``
reads as a record (an escaped lone surrogate, which DuckDB does not accept), or a line longer than
DuckDB is told to expect, raises ``PlainReaderNeeded``: the caller then reads the file with the
plain reader, so no record the plain reader keeps is lost.

Figures: ``benchmarks/journal.py`` (``tool-heavy re-serialised`` beside ``tool-heavy``).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from agent_kernel.journal._fast.columns import EventColumns
from agent_kernel.journal._fast.data_pieces import DataPiece
from agent_kernel.journal._fast.line_scan import EVENT_TYPES
from agent_kernel.journal._format import GROUP_FIELDS
from agent_kernel.journal._reader import ENVELOPE_SQL, LineCount, TornLineWarning, read_header, read_json_sql

_TYPE_CODE = {name: code for code, name in enumerate(EVENT_TYPES)}
# DuckDB buffers about this much of the file per read: with 256 MB (what ``journal.sql`` allows)
# its own peak while reading a re-serialised 300,000-event journal was 1.8 times the file, with
# 16 MB 1.1 times. A longer line sends the file to the plain reader.
_LONGEST_LINE = 16 << 20
_ENVELOPE = ", ".join(name for name, _ in ENVELOPE_SQL)
# Records take a missing iteration as 0, as ``AgentEvent.from_dict`` does.
_RECORD_ENVELOPE = ", ".join("coalesce(iteration, 0) AS iteration" if name == "iteration" else name for name, _ in ENVELOPE_SQL)
# Each data key, its value's JSON text when the value is not a string, and its text when it is
# (unescaped by DuckDB). A JSON null is neither.
_DATA_ENTRIES = (
    "map_keys(data) AS _keys, "
    "list_transform(map_values(data), lambda v: CASE WHEN NOT starts_with(v, '\"') THEN v END) AS _json, "
    "list_transform(map_values(data), lambda v: CASE WHEN starts_with(v, '\"') THEN v->>'$' END) AS _text"
)


class PlainReaderNeeded(Exception):
    """DuckDB refused a line that ``json`` reads as a record, or one too long for it: read the file
    with the plain reader."""


def read_columns(path: Path, stacklevel: int) -> EventColumns:
    """The columns of the journal at ``path`` (``columns.EventColumns``), events of unknown types left out.

    Damaged lines and unknown types are counted in one ``SkippedLinesWarning``, a torn last line
    skipped with a ``TornLineWarning``, both at ``stacklevel`` above the caller.

    Raises:
        PlainReaderNeeded: see the module docstring.
    """
    table = _read(path, f"{_ENVELOPE}, {_DATA_ENTRIES}", "MAP(VARCHAR, JSON)")
    codes = _type_codes(table["type"])
    rows, count = _event_rows(table, codes, path, stacklevel + 1)
    count.unknown_types.update(table["type"].take(pa.array(rows[codes[rows] < 0])).to_pylist())
    count.warn(path, stacklevel=stacklevel + 1)
    keep = rows[codes[rows] >= 0]
    seq = table["seq"].take(pa.array(keep)).to_numpy()
    ts = table["ts"].take(pa.array(keep)).to_numpy()
    group, groups = _groups(table, keep)
    batches = table.select(["_keys", "_json", "_text"]).to_batches()
    del table  # each batch is let go once its values are taken (``_data``)
    return EventColumns(len(keep), seq, ts, group, groups, codes[keep], _data(batches, len(codes), keep))


def read_records(path: Path, skip_types: Iterable[str], stacklevel: int) -> list[dict[str, Any]]:
    """The event records of the journal at ``path`` as dicts, but those of ``skip_types``.

    Events of unknown types are kept, for the caller to count. Damaged lines are counted in a
    ``SkippedLinesWarning``, a torn last line skipped with a ``TornLineWarning``, both at
    ``stacklevel`` above the caller.

    Raises:
        PlainReaderNeeded: see the module docstring.
    """
    skip = ", ".join("'" + str(kind).replace("'", "''") + "'" for kind in skip_types)
    payload = f"CASE WHEN type IN ({skip}) THEN NULL ELSE CAST(data AS VARCHAR) END" if skip else "CAST(data AS VARCHAR)"
    table = _read(path, f"{_RECORD_ENVELOPE}, {payload} AS data", "JSON")
    rows, count = _event_rows(table, _type_codes(table["type"]), path, stacklevel + 1)
    count.warn(path, stacklevel=stacklevel + 1)
    skipped = set(map(str, skip_types))
    kept = table.take(pa.array(rows))
    kept = kept.filter(pc.invert(pc.is_in(kept["type"], pa.array(sorted(skipped), pa.string())))) if skipped else kept
    data = kept["data"].to_pylist()
    payloads = json.loads("[" + ",".join("null" if text is None else text for text in data) + "]")
    names = [name for name, _ in ENVELOPE_SQL]
    columns = [kept[name].to_pylist() for name in names]
    return [{**dict(zip(names, envelope)), "data": payload} for envelope, payload in zip(zip(*columns), payloads)]


def _read(path: Path, select: str, data_type: str) -> pa.Table:
    """Every non-blank line of ``path`` as a row of ``select`` (over ``reader.read_json_sql``), in file order.

    Raises:
        PlainReaderNeeded: a line is longer than ``_LONGEST_LINE``.
    """
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET enable_progress_bar = false")  # DuckDB draws one on stderr for a long read
        return con.sql(f"SELECT {select} FROM {read_json_sql([path], data=data_type, longest_line=_LONGEST_LINE)}").to_arrow_table()
    except duckdb.InvalidInputException as exc:
        if "maximum_object_size" in str(exc):
            raise PlainReaderNeeded from None
        raise
    finally:
        con.close()


def _type_codes(types: pa.ChunkedArray) -> np.ndarray:
    """Each row's type as an index into ``EVENT_TYPES`` (int16), -1 for an unknown type or none."""
    encoded = types.combine_chunks().dictionary_encode()
    lookup = np.asarray([_TYPE_CODE.get(name, -1) for name in encoded.dictionary.to_pylist()] + [-1], np.int16)
    return lookup[encoded.indices.fill_null(len(encoded.dictionary)).to_numpy()]


def _event_rows(table: pa.Table, codes: np.ndarray, path: Path, stacklevel: int) -> tuple[np.ndarray, LineCount]:
    """The rows of ``table`` that are events (known types or not), and the damaged lines counted.

    A row of NULLs is the header (the first row, when the file starts with one), a torn last
    line (warned about here), or a damaged line.

    Raises:
        PlainReaderNeeded: a damaged row is a line ``json`` reads as a record.
    """
    valid = np.ones(table.num_rows, bool)
    for name in ("seq", "ts", "type"):
        valid &= table[name].is_valid().to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(valid)
    count = LineCount()
    bad = np.flatnonzero(~valid)
    if not len(bad):
        return rows, count
    if bad[0] == 0 and read_header(path) is not None:
        bad = bad[1:]
    if len(bad) and bad[-1] == table.num_rows - 1 and _torn_tail(path, stacklevel + 1):
        bad = bad[:-1]
    if len(bad):
        _count_damaged(path, bad, table.num_rows, count)
    return rows, count


def _torn_tail(path: Path, stacklevel: int) -> bool:
    """Whether the file ends in a torn line (one without its newline that is not a record); warns if so."""
    tail = _last_line(path)
    if not tail.strip() or _is_record(tail):
        return False
    warnings.warn(
        TornLineWarning(f"{path}: skipped a torn last line ({len(tail)} bytes), left by a crash mid-write; every complete record before it was read."),
        stacklevel=stacklevel + 1,
    )
    return True


def _last_line(path: Path) -> bytes:
    """The bytes after the file's last newline (empty when it ends in one)."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        size = 1 << 16
        while True:
            start = max(0, end - size)
            f.seek(start)
            block = f.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0 or start == 0:
                return block[cut + 1 :]
            size *= 4


def _is_record(line: bytes) -> bool:
    """Whether ``json`` reads ``line`` as an event record (``reader.iter_records``' test)."""
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and {"seq", "ts", "type"} <= record.keys()


def _count_damaged(path: Path, bad: np.ndarray, rows: int, count: LineCount) -> None:
    """Counts the damaged rows ``bad`` in ``count`` with their line numbers, found in the file
    (DuckDB gives no row for a blank line, so a row's number is that of the non-blank line).

    Raises:
        PlainReaderNeeded: ``json`` reads one of them as a record.
    """
    lines = Path(path).read_bytes().splitlines()
    numbers = [number for number, line in enumerate(lines, 1) if line.strip()]
    if len(numbers) != rows:  # whitespace DuckDB and Python tell apart differently: count without numbers
        count.damaged += len(bad)
        return
    for row in bad.tolist():
        if _is_record(lines[numbers[row] - 1]):
            raise PlainReaderNeeded
        count.mark_damaged(numbers[row])


def _groups(table: pa.Table, rows: np.ndarray) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Each row's group (an index into the groups) and the groups: one dict per distinct set of
    id fields (``format.GROUP_FIELDS``), with ``parent_agent_id`` None (``events_frame`` fills it)."""
    key = np.zeros(len(rows), np.int64)
    values: list[tuple[np.ndarray, list[Any]]] = []
    for name in GROUP_FIELDS:
        encoded = table[name].combine_chunks().dictionary_encode(null_encoding="encode")
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)[rows]
        values.append((codes, encoded.dictionary.to_pylist()))
        # Factorised after each field, the combined key stays below the row count: no overflow.
        key = pd.factorize(key * len(encoded.dictionary) + codes)[0]
    group, distinct = pd.factorize(key)
    first = np.empty(len(distinct), np.int64)
    first[group[::-1]] = np.arange(len(rows))[::-1]  # each group's first row
    groups = [
        {**{name: names[codes[row]] for name, (codes, names) in zip(GROUP_FIELDS, values)}, "parent_agent_id": None}
        for row in first.tolist()
    ]
    return group.astype(np.int64), groups


def _data(batches: list[pa.RecordBatch], count: int, rows: np.ndarray) -> dict[str, list[DataPiece]]:
    """The data values of ``rows`` of the ``count`` rows in ``batches`` (their ``_keys``, ``_json``
    and ``_text`` columns), as pieces per key (see the module docstring).

    Each of DuckDB's batches is taken on its own, and let go once its values are: joining them
    first copied every value once more, into memory Arrow keeps for reuse (peak memory,
    benchmarks/journal.py). ``batches`` is emptied.
    """
    remap = np.full(count, -1, np.int64)  # a table row's row in the columns, -1 if left out
    remap[rows] = np.arange(len(rows))
    data: dict[str, list[DataPiece]] = {}
    start = 0
    batches.reverse()
    while batches:
        batch = batches.pop()
        keys = batch.column(0)
        lengths = pc.list_value_length(keys).fill_null(0).to_numpy()
        entry_rows = remap[start + np.repeat(np.arange(batch.num_rows), lengths)]
        start += batch.num_rows
        names, as_json, as_text = keys.flatten(), batch.column(1).flatten(), batch.column(2).flatten()
        for name, pieces in _batch_data(entry_rows, names, as_json, as_text).items():
            data.setdefault(name, []).extend(pieces)
    return data


def _batch_data(entry_rows: np.ndarray, names: pa.Array, as_json: pa.Array, as_text: pa.Array) -> dict[str, list[DataPiece]]:
    """One batch's data entries (a key, its row, its value as JSON text or as text) as pieces per key."""
    if (entry_rows < 0).any():  # entries of rows left out (unknown types)
        kept = pa.array(np.flatnonzero(entry_rows >= 0))
        entry_rows, names, as_json, as_text = entry_rows[entry_rows >= 0], names.take(kept), as_json.take(kept), as_text.take(kept)
    if not len(entry_rows):
        return {}
    encoded = names.dictionary_encode()
    key_codes = encoded.indices.to_numpy(zero_copy_only=False)
    is_json = as_json.is_valid().to_numpy(zero_copy_only=False)
    is_text = as_text.is_valid().to_numpy(zero_copy_only=False)
    order = np.argsort(key_codes, kind="stable")  # each key's entries together, in row order
    key_names = encoded.dictionary.to_pylist()
    data: dict[str, list[DataPiece]] = {}
    for at in np.split(order, np.flatnonzero(np.diff(key_codes[order])) + 1):
        texts, jsons = is_text[at], is_json[at]
        if texts.any() and not jsons.any():
            values: Any = as_text.take(pa.array(at))  # strings (a JSON null is a null)
        else:
            values = _python_values(as_json, as_text, at, jsons, texts)
        data[key_names[key_codes[at[0]]]] = [DataPiece(entry_rows[at], values)]
    return data


def _python_values(as_json: pa.Array, as_text: pa.Array, at: np.ndarray, jsons: np.ndarray, texts: np.ndarray) -> list[Any]:
    """The values of entries ``at`` as ``json.loads`` gives them: the non-strings parsed in one
    call, the strings as they are, None for a JSON null."""
    out = np.empty(len(at), dtype=object)
    if jsons.any():
        parsed = json.loads("[" + ",".join(as_json.take(pa.array(at[jsons])).to_pylist()) + "]")
        out[np.flatnonzero(jsons)] = np.fromiter(parsed, dtype=object, count=len(parsed))  # lists and dicts stay single objects
    if texts.any():
        strings = as_text.take(pa.array(at[texts])).to_pylist()
        out[np.flatnonzero(texts)] = np.fromiter(strings, dtype=object, count=len(strings))
    return out.tolist()
