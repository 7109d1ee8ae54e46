"""journal.chunk_columns — one chunk of the writer's lines turned into columns: envelope and payloads.

``parse_chunk`` runs in a worker thread per chunk (``columns.columns_from_file``). The envelope
comes from ``line_scan``: ``seq`` and ``ts`` column-wise, the id sections dictionary-encoded (a
turn's lines share one, parsed once). Payloads go three ways, cheapest first:

* one plain string under one key (most per-token deltas): the bytes are gathered straight into an
  Arrow string array (``plain_strings``);
* flat payloads (scalar values only) of frequent types: Arrow's JSON reader, one buffer per type
  (``arrow_table``), which releases the GIL;
* the rest (nested values, rare types, very long payloads): one ``json.loads`` per type, transposed
  into columns a key set at a time (``data_pieces.pivot``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from agent_kernel.journal._fast.data_pieces import DataPiece, pivot
from agent_kernel.journal._fast.line_scan import DATA_BYTES, EVENT_TYPES, SEQ_BYTES, TS_BYTES, NotCanonical, byte_mask, id_fields, integers, locate, matches_each, views
from agent_kernel.journal._format import STRING_PAYLOAD_CLOSE, STRING_PAYLOAD_KEY_END, STRING_PAYLOAD_OPEN

_ARROW_MIN_ROWS = 128  # below this a type's payloads in a chunk are parsed with json (Arrow's call costs more)
_MAX_FAST_PAYLOAD = 1 << 16  # longer payloads of a frequent type are parsed with json
_EXACT_FLOAT_INTEGERS = 2.0**53  # a float at least this large may stand for an integer json keeps exact
_FLAT_ARROW = (pa.types.is_boolean, pa.types.is_int64, pa.types.is_float64, pa.types.is_string, pa.types.is_null)
_STRING_OPEN, _STRING_KEY_END, _STRING_CLOSE = (text.encode() for text in (STRING_PAYLOAD_OPEN, STRING_PAYLOAD_KEY_END, STRING_PAYLOAD_CLOSE))


@dataclass
class Part:
    """One chunk's columns, with row numbers local to the chunk (``columns`` offsets them)."""

    length: int
    seq: np.ndarray
    ts: np.ndarray
    id_texts: list[bytes]
    id_fields: list[dict[str, Any]]
    id_codes: np.ndarray
    type_code: np.ndarray
    tables: list[tuple[np.ndarray, pa.Table]]
    json_pieces: dict[str, list[DataPiece]]


def parse_chunk(chunk: bytearray, size: int, shapes: Shapes | None = None) -> Part | None:
    """The columns of ``chunk[:size]``: whole canonical lines, then zero padding (see ``line_scan``).

    ``shapes`` carries what earlier chunks of the file showed (see ``Shapes``).

    Raises:
        NotCanonical: a line is not in the writer's layout.
    """
    lines = locate(chunk, size)
    if lines is None:
        return None
    buf, data, starts, ends = lines.buf, lines.data, lines.starts, lines.ends
    ts_at, ids_at, type_at, data_at, codes = lines.ts_at, lines.ids_at, lines.type_at, lines.data_at, lines.codes
    n = len(ends)
    seq = integers(buf, starts + len(SEQ_BYTES), ts_at)
    try:
        # Via a plain string array: casting string views to numbers is several times slower.
        ts = pc.cast(views(buf, data, ts_at + len(TS_BYTES), ids_at).cast(pa.string()), pa.float64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise NotCanonical from None
    ids = pc.dictionary_encode(views(buf, data, ids_at, type_at))
    # A payload line for Arrow is the data object then the record's closing brace, blanked to a
    # space, then the newline: "{...} \n". The json slices stop before that brace.
    buf[ends - 1] = 32
    tables, pieces = _payloads(chunk, buf, data, codes, data_at + len(DATA_BYTES), ends - 1, shapes or Shapes())
    id_texts = ids.dictionary.to_pylist()
    return Part(n, seq, ts, id_texts, id_fields(id_texts), ids.indices.to_numpy(), codes, tables, pieces)


class Shapes:
    """What earlier chunks of a file showed of each frequent type's payloads: always flat, always
    nested, or mixed (type code -> ``FLAT``, ``NESTED`` or ``MIXED``).

    A type keeps its shape through a journal (``tool_result`` is flat, ``tool_start`` holds its
    nested ``arguments``), so after the first chunk most rows go straight to their parser without
    the per-row scan (``_nested_rows``), which was an eighth of a tool-heavy journal's parse
    (benchmarks/journal.py). A guess costs only speed when wrong: a "flat" type whose table comes
    back nested is scanned after all, and json reads flat rows as well as nested ones. Chunks
    parsed at once share one ``Shapes``; a race only costs a scan.
    """

    FLAT, NESTED, MIXED = "flat", "nested", "mixed"

    def __init__(self) -> None:
        self.of: dict[int, str] = {}


def _payloads(
    chunk: bytearray,
    buf: np.ndarray,
    data: pa.Buffer,
    codes: np.ndarray,
    begin: np.ndarray,
    end: np.ndarray,
    shapes: Shapes,
) -> tuple[list[tuple[np.ndarray, pa.Table]], dict[str, list[DataPiece]]]:
    """The payloads: plain strings read in place, Arrow tables for the flat payloads of frequent
    types, json for the rest.

    Flat is decided per row, before any parser runs (``_nested_rows``), unless earlier chunks
    showed the type always one or the other (``Shapes``). Most types are one or the other; a
    type that mixes them (a ``tool_start`` without arguments beside those with) gives Arrow only
    its flat rows, so Arrow never parses rows whose table would be thrown away.
    """
    counts = np.bincount(codes, minlength=len(EVENT_TYPES))
    tables: list[tuple[np.ndarray, pa.Table]] = []
    slow: dict[int, list[np.ndarray]] = {}
    for code in np.flatnonzero((counts > 0) & (counts < _ARROW_MIN_ROWS)).tolist():
        slow[code] = [np.flatnonzero(codes == code)]
    nested: np.ndarray | None = None
    for code in np.flatnonzero(counts >= _ARROW_MIN_ROWS).tolist():
        local = np.flatnonzero(codes == code)
        plain = plain_strings(buf, begin[local], end[local])
        if plain is not None:
            key, ok, values = plain
            tables.append((local[ok], pa.table({key: values})))
            local = local[~ok]
            if not len(local):
                continue
        shape = shapes.of.get(code)
        short = end[local] - begin[local] <= _MAX_FAST_PAYLOAD
        if shape == Shapes.NESTED:
            slow[code] = [local]
            continue
        if shape == Shapes.FLAT and short.all():
            table = arrow_table(buf, data, begin[local], end[local])
            if table is not None:
                tables.append((local, table))
                continue
        if nested is None:
            nested = _nested_rows(buf, begin, end)
        flat = ~nested[local] & short
        shapes.of[code] = Shapes.FLAT if flat.all() else Shapes.NESTED if not flat.any() else Shapes.MIXED
        table = arrow_table(buf, data, begin[local[flat]], end[local[flat]]) if flat.sum() >= _ARROW_MIN_ROWS else None
        if table is None:
            slow.setdefault(code, []).append(local)
        else:
            tables.append((local[flat], table))
            slow.setdefault(code, []).append(local[~flat])
    pieces: dict[str, list[DataPiece]] = {}
    view = memoryview(chunk)
    for parts in slow.values():
        rows = np.sort(np.concatenate(parts)) if len(parts) > 1 else parts[0]
        if not len(rows):
            continue
        # One json.loads per type over a JSON array of its payloads: the per-call overhead
        # dominates otherwise, and a type's payloads share their keys, so they pivot with one zip.
        joined = b",".join([view[b:e] for b, e in zip(begin[rows].tolist(), end[rows].tolist())])
        payloads = _loads(b"[" + joined + b"]")
        if len(payloads) != len(rows) or set(map(type, payloads)) != {dict}:
            raise NotCanonical
        for key, found in pivot(rows, payloads).items():
            pieces.setdefault(key, []).extend(found)
    return tables, pieces


def _loads(text: bytes) -> Any:
    """Parses a chunk's payloads with ``json``, as the plain reader does.

    (orjson would be faster, but it reads integers past 64 bits as floats without a word.)

    Raises:
        NotCanonical: the text is not JSON.
    """
    try:
        return json.loads(text)
    except ValueError:
        raise NotCanonical from None


def _nested_rows(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each payload ``[begin, end)``, whether it may hold a nested value.

    In the writer's compact JSON a nested object or array inside the payload opens right after a
    colon (a member's value), so only a ``{`` or ``[`` after ``:`` counts: a bracket inside a
    string seldom follows one (a tool call's streamed arguments, ``"delta":"{\\"path\\"...``, do
    not), so such rows still go to Arrow. A row taken for flat wrongly costs only speed: Arrow's
    schema then shows the nesting and the type goes to json (``arrow_table``).
    """
    folded = np.bitwise_or(buf, 32, out=np.empty_like(buf))
    opens = np.flatnonzero(np.equal(folded, 123, out=byte_mask(len(buf))))  # "{" (0x7b) and "[" (0x5b)
    opens = opens[buf[opens - 1] == 58]  # after ":"; the payload's own brace is one of them
    return np.searchsorted(opens, end) - np.searchsorted(opens, begin) > 1


def plain_strings(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple[str, np.ndarray, pa.Array] | None:
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
    ok &= matches_each(buf, body_end, _STRING_CLOSE)  # the text's closing quote, then "}"
    ok &= matches_each(buf, begin, prefix)
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


def arrow_table(buf: np.ndarray, data: pa.Buffer, begin: np.ndarray, end: np.ndarray) -> pa.Table | None:
    """The payloads of one type as an Arrow table, or None when json must parse them."""
    lines = views(buf, data, begin, end + 2).cast(pa.string())  # "{...} \n" each, packed
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
    for column in table.columns:
        # Arrow reads an integer past int64 as a float; json keeps it an int, and an int past 2**53
        # beside floats makes the column objects (frames): json decides such values.
        if pa.types.is_float64(column.type) and (pc.max(pc.abs(column)).as_py() or 0) >= _EXACT_FLOAT_INTEGERS:
            return None
    return table
