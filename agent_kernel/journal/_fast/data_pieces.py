"""journal.data_pieces — event payloads (``data``) as pieces of columns, one per key, and their kinds.

A ``DataPiece`` holds the values of one data key for some rows: an Arrow array (payloads Arrow's
JSON reader parsed, or strings read in place) or a Python list (payloads ``json`` parsed, or a
live agent's events). ``frames.events_df`` assembles each key's pieces into one column whose dtype
follows the kinds of its values (``data_kind``, ``arrow_kind``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

Values: TypeAlias = "pa.Array | list[Any]"


@dataclass
class DataPiece:
    """Values of one data key for some rows: ``rows`` (int64 row numbers) and ``values``."""

    rows: np.ndarray
    values: Values


def pivot(rows: np.ndarray, payloads: Sequence[Any], kinds: np.ndarray | None = None) -> dict[str, list[DataPiece]]:
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
