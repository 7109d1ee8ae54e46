"""journal.event_frame — the events frame (``frames.events_df``) assembled from ``EventColumns``.

Also the dtypes every frame shares (``STRING``, ``TIME``, ``TYPE_DTYPE``) and the events frame's
fixed columns (``EVENT_COLUMNS``); ``frames`` documents the columns and re-exports these.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from agent_kernel.events._event import EventType
from agent_kernel.journal._fast import EVENT_TYPES, ID_FIELDS, EventColumns, arrow_kind, data_kind, worker_threads

STRING = pd.StringDtype("pyarrow")
TIME = pd.DatetimeTZDtype("ns", "UTC")
TYPE_DTYPE = pd.CategoricalDtype(list(EVENT_TYPES))
AGENT_COLUMNS = {"agent_id": STRING, "parent_agent_id": STRING}

EVENT_COLUMNS: dict[str, Any] = {
    "seq": "int64",
    "ts": TIME,
    "session_id": STRING,
    "run_id": STRING,
    "turn_id": STRING,
    "parent_turn_id": STRING,
    **AGENT_COLUMNS,
    "iteration": "int64",
    "type": TYPE_DTYPE,
}


def utc(seconds: Any) -> pd.DatetimeIndex:
    """Seconds since the epoch (float, NaN for missing) as datetime64[ns, UTC]."""
    values = np.asarray(seconds, dtype=np.float64)
    nanos = np.where(np.isnan(values), 0, np.round(values * 1e9)).astype(np.int64)
    index = pd.to_datetime(nanos, unit="ns", utc=True)
    return index.where(~np.isnan(values), pd.NaT) if np.isnan(values).any() else index


def objects(values: list[Any]) -> np.ndarray:
    """``values`` as a NumPy object array, lists and dicts kept as single objects."""
    # fromiter keeps lists and dicts as single objects (np.array would make them dimensions).
    return np.fromiter(values, dtype=object, count=len(values))


def _string_take(values: list[Any], codes: np.ndarray) -> pd.arrays.ArrowStringArray:
    """``values[codes]`` as a string column (``values``: one per group, ``codes``: a group per row)."""
    if all(value is None for value in values):  # agent ids of a single agent; parent ids before they are filled
        return pd.arrays.ArrowStringArray(pa.nulls(len(codes), pa.large_string()))
    # large_string: what pandas stores, so wrapping the result copies nothing.
    dictionary = pa.array([None if v is None else str(v) for v in values], pa.large_string())
    return pd.arrays.ArrowStringArray(dictionary.take(pa.array(codes)))


def events_frame(columns: EventColumns) -> pd.DataFrame:
    """The frame ``frames.events_df`` returns, from the columns of a source."""
    n = columns.length
    groups = columns.groups
    # Each column is a fresh full-length array, and filling them (page faults included) is most
    # of the time here; NumPy and Arrow release the GIL for it, so the columns fill in parallel,
    # the largest first. The id columns spread each group's value over its rows.
    ids = (*ID_FIELDS[:4], "agent_id", "parent_agent_id")
    jobs: dict[str, Callable[[], Any]] = {name: partial(_string_take, [g.get(name) for g in groups], columns.group) for name in ids}
    keys = sorted(columns.data, key=lambda key: -sum(len(piece.rows) for piece in columns.data[key]))
    jobs.update({f"data:{key}": partial(_data_column, columns.data.pop(key), n) for key in keys})
    with ThreadPoolExecutor(worker_threads(), thread_name_prefix="journal-frame") as pool:
        built = dict(zip(jobs, pool.map(lambda job: job(), jobs.values())))
    out: dict[str, Any] = {"seq": columns.seq, "ts": utc(columns.ts)}
    out.update((name, built.pop(name)) for name in ids)
    iterations = np.asarray([int(g.get("iteration") or 0) for g in groups] or [0], np.int64)
    out["iteration"] = iterations[columns.group] if n else np.empty(0, np.int64)
    out["type"] = pd.Categorical.from_codes(columns.type_code, dtype=TYPE_DTYPE)
    for key in sorted(name.removeprefix("data:") for name in built):
        out[f"data_{key}" if key in EVENT_COLUMNS else key] = built[f"data:{key}"]
    frame = pd.DataFrame(out, copy=False)
    _fill_parent_agents(frame, columns)
    return frame


_SUBAGENT_START = EVENT_TYPES.index(EventType.SUBAGENT_START.value)


def _missing(value: Any) -> bool:
    """A missing cell of a data column (None, pd.NA or NaN); any other value, list or dict included, is present."""
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _fill_parent_agents(frame: pd.DataFrame, columns: EventColumns) -> None:
    """Fills ``parent_agent_id`` from the ``subagent_start`` rows (an event names only its own agent).

    A row's agent is one of its group's id fields, so the parent is looked up once per group and
    spread like the id columns: mapping a million rows' strings was a fifth of the time spent
    building the frame of a crew's journal (benchmarks/journal.py).
    """
    if "data_parent_agent_id" not in frame or "data_agent_id" not in frame:
        return
    starts = np.flatnonzero(columns.type_code == _SUBAGENT_START)
    children = frame["data_agent_id"].iloc[starts].tolist()
    parents = {child: None if _missing(parent) else parent
               for child, parent in zip(children, frame["data_parent_agent_id"].iloc[starts].tolist()) if not _missing(child)}
    frame["parent_agent_id"] = _string_take([parents.get(g.get("agent_id")) for g in columns.groups], columns.group)


_ARROW_TYPES = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.large_string()}


def _data_column(pieces: list[Any], n: int) -> Any:
    # Pieces in the order of their first rows: a key's pieces then seldom interleave (only where
    # two types of one chunk share the key), so its values are mostly in row order already and
    # strings spread without a sorting copy (``_spread_strings``).
    pieces = sorted(pieces, key=lambda piece: int(piece.rows[0]) if len(piece.rows) else -1)
    kinds = set()
    for piece in pieces:
        values = piece.values
        kind = arrow_kind(values) if isinstance(values, pa.Array) else data_kind(values)
        if kind != "null":
            kinds.add(kind)
    kind = "float" if kinds == {"int", "float"} else (kinds.pop() if len(kinds) == 1 else "object")
    if kind == "object":
        return _object_column(pieces, n)
    arrow_type = _ARROW_TYPES[kind]
    try:
        arrays = [
            p.values.cast(arrow_type) if isinstance(p.values, pa.Array) else pa.array(p.values, type=arrow_type)
            for p in pieces
        ]
    except (pa.ArrowInvalid, OverflowError, UnicodeEncodeError):
        # An integer beyond int64, or a lone surrogate an older writer kept: the Python values as they are.
        return _object_column(pieces, n)
    if kind == "str":
        return _string_column(arrays, [p.rows for p in pieces], n)
    values = pa.concat_arrays(arrays)
    rows = np.concatenate([p.rows for p in pieces])
    # Numbers and booleans scatter into NumPy arrays with a missing-value mask.
    present = values.is_valid().to_numpy(zero_copy_only=False)
    filled = values.fill_null(False if kind == "bool" else 0).to_numpy(zero_copy_only=False)
    missing = np.ones(n, bool)
    missing[rows[present]] = False
    if kind == "float":
        out = np.full(n, np.nan)
        out[rows[present]] = filled[present]
        return out
    out = np.zeros(n, bool if kind == "bool" else np.int64)
    out[rows] = filled
    return pd.arrays.BooleanArray(out, missing) if kind == "bool" else pd.arrays.IntegerArray(out, missing)


_SMALL_PIECE = 1 << 18  # bytes of text: smaller neighbouring pieces are joined into one chunk


def _string_column(arrays: list[pa.Array], rows: list[np.ndarray], n: int) -> pd.arrays.ArrowStringArray:
    """A string column of ``n`` rows from large_string pieces (sorted by first row), as chunks.

    A large piece's text becomes a chunk of the column as it is, without a copy: joining the
    pieces copied every byte of the tool results of a tool-heavy journal once more, into fresh
    memory, a fifth of the time spent building its frame (benchmarks/journal.py). Pieces whose
    rows interleave (two types of one file chunk sharing a key) and runs of small pieces are
    joined, so chunks stay few.
    """
    chunks: list[pa.Array] = []
    group: list[int] = []
    start = reach = size = 0
    for i, where in enumerate(rows):
        nbytes = arrays[i].nbytes
        if group and int(where[0]) > reach and (size >= _SMALL_PIECE or nbytes >= _SMALL_PIECE):
            start = _close_chunk(chunks, [arrays[j] for j in group], [rows[j] for j in group], start, reach + 1)
            group, size = [], 0
        group.append(i)
        size += nbytes
        reach = max(reach, int(where[-1]))
    if group:
        _close_chunk(chunks, [arrays[j] for j in group], [rows[j] for j in group], start, n)
    return pd.arrays.ArrowStringArray(pa.chunked_array(chunks, pa.large_string()))


def _close_chunk(chunks: list[pa.Array], arrays: list[pa.Array], rows: list[np.ndarray], start: int, stop: int) -> int:
    """Appends the chunk of rows ``[start, stop)`` holding ``arrays`` at ``rows``; returns ``stop``."""
    values = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
    chunks.append(_spread_strings(values, np.concatenate(rows) - start if len(rows) > 1 else rows[0] - start, stop - start))
    return stop


def _spread_strings(values: pa.LargeStringArray, rows: np.ndarray, n: int) -> pa.LargeStringArray:
    """A large_string array of ``n`` rows holding ``values`` at ``rows``, null elsewhere.

    Built from its buffers: the offsets are the values' lengths placed at their rows and summed,
    the bytes are the values' own, in row order. No n-long index or copy of a gather, which for a
    column with a few values in a million rows is most of its cost.
    """
    if len(rows) > 1 and (rows[1:] < rows[:-1]).any():
        order = np.argsort(rows, kind="stable")
        values, rows = values.take(pa.array(order)), rows[order]
    present = np.zeros(n, bool)
    present[rows[values.is_valid().to_numpy(zero_copy_only=False)] if values.null_count else rows] = True
    if values.null_count:
        values = values.fill_null("")  # a JSON null holds no bytes; the validity bitmap says it is missing
    _, own_offsets, data = values.buffers()
    bounds = np.frombuffer(own_offsets, np.int64, len(values) + 1, values.offset * 8)
    offsets = np.zeros(n + 1, np.int64)
    offsets[rows + 1] = np.diff(bounds)
    np.cumsum(offsets, out=offsets)
    data = data[int(bounds[0]) : int(bounds[-1])]
    validity = pa.py_buffer(np.packbits(present, bitorder="little"))
    missing = n - int(np.count_nonzero(present))
    return pa.Array.from_buffers(pa.large_string(), n, [validity, pa.py_buffer(offsets), data], null_count=missing)


def _object_column(pieces: list[Any], n: int) -> np.ndarray:
    out = np.empty(n, dtype=object)  # NumPy fills object arrays with None, more cheaply than np.full
    for piece in pieces:
        values = piece.values.to_pylist() if isinstance(piece.values, pa.Array) else piece.values
        out[piece.rows] = objects(values)
    return out
