"""memory.namespace — NamespaceWatcher: what changed among a notebook's variables, never their values.

A reminder tells the agent which variables are new, changed or gone since the last prompt, by
name and by shape: a pandas DataFrame by its shape and columns, an array by shape and dtype, a
container by its length, anything else by its type. Values are never read or shown.

Detection is cheap, because it runs before every prompt over the whole namespace: each variable
gets a signature (object identity, type, and shape or length), and only a variable whose
signature moved is described. pandas and numpy are recognised by duck typing, so neither is
imported here.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["IPYTHON_NAMES", "NamespaceWatcher", "VariableChange", "describe", "visible"]

#: Names IPython puts in the user namespace, which are never the person's variables.
IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

_SKIPPED_TYPES = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
_MAX_COLUMNS = 20


@dataclass(frozen=True, slots=True)
class VariableChange:
    """One variable that is new, changed or removed.

    Attributes:
        name: the variable.
        change: ``new``, ``changed`` or ``removed``.
        description: its type and shape (empty for a removed one).
    """

    name: str
    change: str
    description: str

    def to_dict(self) -> dict[str, str]:
        """As journaled in ``system_reminder``."""
        return {"name": self.name, "change": self.change, "description": self.description}


def visible(name: str, value: Any) -> bool:
    """True for a person's own variable: not private, not IPython's, not a module, function or
    class, and not one of agent_kernel's own objects (agents, tools, models)."""
    return (
        not name.startswith("_")
        and name not in IPYTHON_NAMES
        and not isinstance(value, _SKIPPED_TYPES)
        and not type(value).__module__.startswith("agent_kernel")
    )


def describe(value: Any) -> str:
    """The type and shape of ``value``, never its contents.

    Example:
        >>> describe([1, 2, 3])
        'list, len 3'
    """
    kind = type(value)
    name = kind.__name__
    module = kind.__module__.partition(".")[0]
    if module == "pandas" and hasattr(value, "columns") and hasattr(value, "shape"):
        rows, cols = value.shape
        # Plain lists first: slicing pandas objects costs more than the whole description.
        columns = [f"{column} ({dtype})" for column, dtype in zip(value.columns.tolist()[:_MAX_COLUMNS], value.dtypes.tolist()[:_MAX_COLUMNS])]
        if cols > _MAX_COLUMNS:
            columns.append(f"... {cols - _MAX_COLUMNS} more")
        return f"{name}, {rows} rows x {cols} columns: {', '.join(columns)}"
    if module == "pandas" and hasattr(value, "dtype") and hasattr(value, "shape"):
        label = f", name {value.name!r}" if getattr(value, "name", None) is not None else ""
        return f"{name}, length {value.shape[0]}, dtype {value.dtype}{label}"
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and hasattr(value, "dtype"):
        return f"{name}, shape {shape}, dtype {value.dtype}"
    try:
        return f"{name}, len {len(value)}"
    except Exception:  # not sized: the type is all there is to say
        return name


class NamespaceWatcher:
    """Reports what changed in a namespace since the last look.

    A look costs little however large the namespace: which names were bound anew is found by
    comparing object identities in bulk, the lengths of lists, dicts and sets are compared in
    bulk too, and only frames and arrays are measured one by one.

    Args:
        source: the namespace (a mapping, read live) or a function returning it.
    """

    def __init__(self, source: Mapping[str, Any] | Callable[[], Mapping[str, Any]]) -> None:
        self.source = source
        self._names: list[str] | None = None  # every name at the last look, in order
        self._ids: list[int] = []  # the id of each one's value
        self._shown: set[str] = set()  # the visible names at the last look
        self._sized: dict[str, int] = {}  # visible lists, dicts and sets -> their length
        self._arrays: dict[str, tuple[Any, ...]] = {}  # visible frames and arrays -> their signature
        self._sized_names: tuple[str, ...] = ()  # the keys of _sized, for the bulk comparison
        self._sized_lens: tuple[int, ...] = ()

    def _namespace(self) -> Mapping[str, Any]:
        source = self.source
        return source() if callable(source) else source

    def _forget(self, name: str) -> None:
        self._shown.discard(name)
        self._arrays.pop(name, None)
        if self._sized.pop(name, None) is not None:
            self._sized_names = ()

    def _follow(self, name: str, value: Any) -> None:
        """Remembers how to tell an in-place change of ``name``'s new value."""
        self._shown.add(name)
        if type(value) in _SIZED:
            self._sized_names = ()  # the bulk comparison is rebuilt with the new length
            self._sized[name] = len(value)
            self._arrays.pop(name, None)
            return
        if self._sized.pop(name, None) is not None:
            self._sized_names = ()
        signature = _array_signature(value)
        if signature is None:
            self._arrays.pop(name, None)
        else:
            self._arrays[name] = signature

    def changes(self, limit: int | None = None) -> tuple[list[VariableChange], bool]:
        """The variables new, changed or removed since the last call, and whether this is the first.

        The first call reports every variable as ``new``. Only the first ``limit`` changes are
        described (describing a frame takes tens of microseconds); the rest have an empty
        description and are only counted.
        """
        snapshot = dict(self._namespace())  # a copy: the notebook may assign meanwhile
        names, ids = list(snapshot), list(map(id, snapshot.values()))
        before, before_ids = self._names, self._ids
        first = before is None
        gone: Any = ()
        if before is None:
            rebound: Any = names
        elif names == before:  # the usual case: the same names, compared in bulk
            rebound = () if ids == before_ids else [n for n, a, b in zip(names, ids, before_ids) if a != b]
        else:
            old = dict(zip(before, before_ids))
            rebound = [n for n, i in zip(names, ids) if old.get(n) != i]
            gone = old.keys() - snapshot.keys()
        self._names, self._ids = names, ids
        shown = self._shown
        found: list[tuple[str, str, Any]] = []  # name, change, value
        for name in rebound:
            value = snapshot[name]
            if name[:1] == "_" or not visible(name, value):
                if name in shown:  # a variable rebound to something not shown (a function, say)
                    self._forget(name)
                    found.append((name, "removed", None))
                continue
            found.append((name, "changed" if name in shown else "new", value))
            self._follow(name, value)
        for name in gone:
            if name in shown:
                self._forget(name)
                found.append((name, "removed", None))
        found.extend(self._changed_in_place(snapshot))
        if not first:
            found.sort(key=lambda item: item[0])
        limit = len(found) if limit is None else limit
        out = [
            VariableChange(name, change, "" if change == "removed" or i >= limit else describe(value))
            for i, (name, change, value) in enumerate(found)
        ]
        return out, first

    def _changed_in_place(self, snapshot: dict[str, Any]) -> list[tuple[str, str, Any]]:
        found: list[tuple[str, str, Any]] = []
        sized = self._sized
        if sized:
            if not self._sized_names:
                self._sized_names = tuple(sized)
                self._sized_lens = tuple(sized.values())
            names = self._sized_names
            values = operator.itemgetter(*names)(snapshot) if len(names) > 1 else (snapshot[names[0]],)
            lens = tuple(map(len, values))
            if lens != self._sized_lens:  # one comparison in C for every list, dict and set
                for name, value, old_len, now in zip(names, values, self._sized_lens, lens):
                    if old_len != now:
                        sized[name] = now
                        found.append((name, "changed", value))
                self._sized_lens = lens
        arrays = self._arrays
        for name, old_signature in arrays.items():
            value = snapshot[name]
            signature = _array_signature(value)
            if signature is not None and signature != old_signature:
                arrays[name] = signature
                found.append((name, "changed", value))
        return found


_SIZED = frozenset({list, dict, set, bytearray})


def _array_signature(value: Any) -> tuple[Any, ...] | None:
    """What changes when a frame or an array changes in place (None: not one)."""
    kind = type(value)
    module = kind.__module__.partition(".")[0]
    if module == "pandas":
        # Attributes pandas does not define cost a slow __getattr__: ask only for real ones.
        if kind.__name__ == "DataFrame":
            return (value.shape, id(value.columns))
        return (getattr(value, "shape", None), id(getattr(value, "index", None)))
    if module == "numpy":
        return (getattr(value, "shape", None), getattr(value, "dtype", None))
    return None
