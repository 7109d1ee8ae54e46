"""journal.line_scan — where the fields of the writer's lines are, found with NumPy byte operations.

A journal file is read in chunks of whole lines (``blocks``). In a chunk whose every line has the
writer's layout (``journal.format``), ``locate`` finds each line's fields without a JSON parser:
a canonical line has exactly ``TOP_LEVEL_COMMAS`` commas before its payload, so every field
boundary is an index into the sorted comma positions, checked against the key text the writer
puts there; the type name is read from a few machine words (``type_codes``), ``seq`` column-wise
(``integers``), and any field is handed to Arrow as a zero-copy view of the chunk (``views``).

Anything that does not fit raises ``NotCanonical``: the file is then read by DuckDB's JSON reader
(``any_layout``), never misread.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from io import BufferedIOBase
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from agent_kernel.events._event import EventType
from agent_kernel.journal._format import DATA_KEY, GROUP_FIELDS, ID_SECTION_START, LINE_END, MAX_ID_SECTION, MAX_SEQ_DIGITS, MAX_TYPE_NAME, MIN_LINE, SEQ_KEY, TOP_LEVEL_COMMAS, TS_KEY, TYPE_KEY
from agent_kernel.journal._reader import TornLineWarning, parse_header

EVENT_TYPES: tuple[str, ...] = tuple(kind.value for kind in EventType)
# Bytes read and parsed at a time: bounds the working memory (a few chunks are in flight) and how
# long one chunk's json call holds the GIL. Chunk buffers and comparison masks are reused
# (``blocks``, ``byte_mask``), so from 4 to 16 MB the size hardly changes the time
# (benchmarks/journal.py).
CHUNK = 8 << 20
PAD = 64  # zero bytes after a chunk, so a fixed-width window never runs past the buffer

# The writer's layout (journal.format) as bytes: every position below is found from these.
SEQ_BYTES, TS_BYTES, TYPE_BYTES, DATA_BYTES = (text.encode() for text in (SEQ_KEY, TS_KEY, TYPE_KEY, DATA_KEY))
_ID_SECTION_START, _LINE_END = ID_SECTION_START.encode(), LINE_END.encode()
_RECORD_CLOSE = _LINE_END.rstrip(b"\n")  # "}" after the payload, then the newline


class NotCanonical(Exception):
    """A line is not in the writer's layout: the file must be read by ``any_layout``."""


def blocks(f: BufferedIOBase, spare: list[bytearray] | None = None) -> Iterator[tuple[bytearray, int]]:
    """Chunks of whole lines (buffer, size) after the header, then the unterminated tail as ``(tail, -1)``.

    A buffer the caller is done with can be handed back through ``spare`` and is filled again:
    a fresh buffer per chunk was faulted in page by page each time, a tenth of a tool-heavy
    journal's system time (benchmarks/journal.py).
    """
    first = f.readline()
    carry = first if parse_header(first) is None else b""
    while True:
        # One buffer per chunk: the carried partial line, the new bytes, then zero padding that
        # fixed-width reads may run into past the last line.
        block = spare.pop() if spare else bytearray(CHUNK + PAD)
        if len(block) < len(carry) + CHUNK + PAD:  # a line longer than a chunk was carried
            block = bytearray(len(carry) + CHUNK + PAD)
        block[: len(carry)] = carry
        got = f.readinto(memoryview(block)[len(carry) : len(carry) + CHUNK])
        if not got:
            break
        size = len(carry) + got
        cut = block.rfind(b"\n", 0, size) + 1
        carry = bytes(block[cut:size])
        if cut:
            memoryview(block)[cut:] = bytes(len(block) - cut)
            yield block, cut
    yield bytearray(carry), -1


def complete_tail(tail: bytes, path: Path, stacklevel: int) -> bool:
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
            stacklevel=stacklevel + 1,
        )
        return False
    return True


def padded(tail: bytes) -> tuple[bytearray, int]:
    """A complete last line without its newline as a chunk: the line, a newline, the padding."""
    return bytearray(tail + b"\n" + bytes(PAD)), len(tail) + 1


@dataclass
class Lines:
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


def locate(chunk: bytearray, size: int) -> Lines | None:
    """Finds the fields of ``chunk[:size]`` (whole canonical lines, then ``PAD`` zero bytes).

    Raises:
        NotCanonical: a line is not in the writer's layout.
    """
    buf = np.frombuffer(chunk, np.uint8)
    data = pa.py_buffer(chunk)
    mask = byte_mask(size)
    ends = np.flatnonzero(np.equal(buf[:size], 10, out=mask))
    n = len(ends)
    if n == 0:
        return None
    starts = np.empty(n, np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    commas = np.flatnonzero(np.equal(buf[:size], 44, out=mask))
    first = np.searchsorted(commas, starts)
    if (ends - starts + 1 < MIN_LINE).any() or (first + TOP_LEVEL_COMMAS >= len(commas)).any():
        raise NotCanonical
    ts_at, ids_at = commas[first], commas[first + 1]
    type_at = commas[first + TOP_LEVEL_COMMAS - 1]
    data_at = commas[first + TOP_LEVEL_COMMAS] - 1  # DATA_KEY starts with the type name's closing quote
    if (data_at >= ends).any():
        raise NotCanonical
    # Key checks (eight bytes a compare); the id section is checked by parsing it, the type name
    # against the vocabulary, so a line of another shape cannot slip through.
    payload_at = data_at + len(DATA_BYTES)
    ok = (
        _matches(buf, starts, SEQ_BYTES)
        and _matches(buf, ts_at, TS_BYTES)
        and _matches(buf, type_at, TYPE_BYTES)
        and _matches(buf, data_at, DATA_BYTES)
        and _matches(buf, ends - len(_RECORD_CLOSE), _LINE_END)
        and bool((buf[payload_at] == 123).all() and (buf[ends - len(_RECORD_CLOSE) - 1] == 125).all())
    )
    if not ok or (type_at - ids_at > MAX_ID_SECTION).any():
        raise NotCanonical
    codes = _type_codes(buf, type_at + len(TYPE_BYTES), data_at)
    return Lines(buf, data, starts, ends, ts_at, ids_at, type_at, data_at, codes)


_scratch = threading.local()


def byte_mask(size: int) -> np.ndarray:
    """A bool array of ``size`` to compare a chunk's bytes into, kept per thread and reused.

    Each comparison over a chunk made a fresh chunk-sized array, and the allocator gave most of
    them back to the system and faulted them in again (benchmarks/journal.py: a third of the
    system time of reading a tool-heavy journal).
    """
    mask: np.ndarray | None = getattr(_scratch, "mask", None)
    if mask is None or len(mask) < size:
        mask = _scratch.mask = np.empty(max(size, CHUNK + PAD), bool)
    return mask[:size]


def id_fields(texts: list[bytes]) -> list[dict[str, Any]]:
    """The id fields of canonical id sections (``,"session_id":...,"agent_id":...``), parsed with
    one json call for the chunk: a turn has its own section, and a call per turn was a sixth of
    the time on a tool-heavy journal."""
    if not all(text.startswith(_ID_SECTION_START) for text in texts):
        raise NotCanonical
    try:
        parsed = json.loads(b"[{" + b"},{".join(text[1:] for text in texts) + b"}]")
    except ValueError:
        raise NotCanonical from None
    if len(parsed) != len(texts) or any(tuple(fields) != GROUP_FIELDS for fields in parsed):
        raise NotCanonical  # an id held a comma (or a key was not where the layout puts it)
    for fields in parsed:
        fields["parent_agent_id"] = None
    return parsed


# -- the type name, read from machine words ----------------------------------------------------

_TYPE_WORDS = (MAX_TYPE_NAME - 8) // 8  # words read from a name's start; its last eight bytes are one more
_TYPE_MIX = np.asarray([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93, 0x27D4EB2F165667C5, 0x85EBCA77C2B2AE63][: _TYPE_WORDS + 2], np.uint64)


def _type_key(name: bytes) -> list[int]:
    """The words that identify a type name in a canonical line (see ``_type_codes``)."""
    line = TYPE_BYTES + name + DATA_BYTES + bytes(8 * _TYPE_WORDS)
    at, size = len(TYPE_BYTES), len(name)
    words = [int.from_bytes(line[at + 8 * k : at + 8 * k + 8], "little") if _fixed_word(k, size) else 0 for k in range(_TYPE_WORDS)]
    return [size, *words, int.from_bytes(line[at + size - 8 : at + size], "little")]


def _fixed_word(k: Any, size: Any) -> Any:
    """Whether the ``k``-th word from a name's start lies within the fixed text (name, then DATA_KEY)."""
    return 8 * k + 8 <= size + len(DATA_BYTES)


def _type_hash(keys: np.ndarray) -> np.ndarray:
    """Mixes type keys (rows of uint64 words) into one uint64 each; the products wrap around."""
    return (keys * _TYPE_MIX).sum(axis=1, dtype=np.uint64)


# A name beyond the limit is left out here (its journals go to DuckDB's reader, and a test in
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
    word for word: an unknown type is not canonical (DuckDB's reader counts it).
    """
    words = _words(buf, "<u8")
    size = end - begin
    if not len(size) or size.min() < 1 or size.max() > MAX_TYPE_NAME:
        raise NotCanonical
    keys = np.empty((len(size), _TYPE_WORDS + 2), np.uint64)
    keys[:, 0] = size
    for k in range(_TYPE_WORDS):
        keys[:, k + 1] = np.where(_fixed_word(k, size), words[begin + 8 * k], np.uint64(0))
    keys[:, -1] = words[end - 8]
    hashes = _type_hash(keys)
    slot = _TYPE_ORDER[np.minimum(np.searchsorted(_TYPE_HASHES, hashes, sorter=_TYPE_ORDER), len(_TYPE_ORDER) - 1)]
    if not (_TYPE_KEYS[slot] == keys).all():
        raise NotCanonical
    return _TYPE_SLOT_CODES[slot]


# -- numbers and bytes ------------------------------------------------------------------------


def integers(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The non-negative decimal integers at ``[begin, end)`` of each line (up to 18 digits)."""
    size = end - begin
    if not len(size) or size.min() < 1 or size.max() > MAX_SEQ_DIGITS:
        raise NotCanonical
    value = np.zeros(len(begin), np.int64)
    for k in range(int(size.max())):
        digit = buf[begin + k].astype(np.int64) - 48
        inside = k < size
        if ((digit < 0) | (digit > 9))[inside].any():
            raise NotCanonical
        value = np.where(inside, value * 10 + digit, value)
    return value


def _words(buf: np.ndarray, dtype: str) -> np.ndarray:
    """``buf`` read as overlapping little-endian words, one starting at every byte."""
    size = np.dtype(dtype).itemsize
    return np.ndarray((len(buf) - size + 1,), dtype=dtype, buffer=buf, strides=(1,))


def matches_each(buf: np.ndarray, positions: np.ndarray, pattern: bytes) -> np.ndarray:
    """For each of ``positions``, whether ``pattern`` starts there in ``buf``."""
    words = _words(buf, "<u8")
    padding = pattern + bytes(-len(pattern) % 8)
    ok = np.ones(len(positions), bool)
    for k in range(0, len(pattern), 8):
        expected = np.frombuffer(padding[k : k + 8], "<u8")[0]
        mask = np.uint64((1 << (8 * min(8, len(pattern) - k))) - 1)
        ok &= (words[positions + k] & mask) == expected
    return ok


def _matches(buf: np.ndarray, positions: np.ndarray, pattern: bytes) -> bool:
    """True if every one of ``positions`` starts an occurrence of ``pattern`` in ``buf``."""
    return bool(matches_each(buf, positions, pattern).all())


def views(buf: np.ndarray, data: pa.Buffer, begin: np.ndarray, end: np.ndarray) -> pa.Array:
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
