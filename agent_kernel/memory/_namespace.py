"""memory.namespace — NamespaceWatcher: what changed among a notebook's variables, never their values.

A reminder tells the agent which variables are new, changed or gone since the last prompt, by
name and by shape: a pandas DataFrame by its shape and columns, an array by shape and dtype, a
container by its length, anything else by its type. Values are never read or shown.

Detection is cheap, because it runs before every prompt over the whole namespace: each variable
gets a signature (object identity, type, and shape or length), and only a variable whose
signature moved is described. pandas and numpy are recognised by their types' modules and names,
so neither is imported here.

A notebook holds objects of every kind, some of which bite when asked about (settings that raise
on any attribute until configured, lazy frames and querysets whose ``len()`` runs a query). So
nothing here calls into an object it does not know: ``len()`` is asked only of the built-in
containers (and their subclasses that keep the built-in length), shapes and dtypes only of
pandas and numpy objects, attributes are looked up on the type, and anything that still raises
describes the value by its type name alone. A reminder never fails because of a variable.
"""

from __future__ import annotations

import collections
import operator
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Names IPython puts in the user namespace, which are never the person's variables.
IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

_SKIPPED_TYPES = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
_MAX_COLUMNS = 20
_MAX_LABEL_CHARS = 60
# The containers whose len() is asked: built in, so it costs nothing and runs no one's code.
_LEN_TYPES = (list, tuple, dict, set, frozenset, str, bytes, bytearray, range, collections.deque)
_SAFE_LENS = frozenset(kind.__len__ for kind in _LEN_TYPES)


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
    """True for a person's own variable: a name that is an identifier, not private, not
    IPython's, and a value that is not a module, function or class, nor one of agent_kernel's own
    objects (agents, tools, models). Asks only the value's type, never the value."""
    if not isinstance(name, str) or name[:1] == "_" or name in IPYTHON_NAMES or not name.isidentifier():
        return False
    kind = type(value)
    if issubclass(kind, _SKIPPED_TYPES):
        return False
    module = _module(kind)
    return not (module == "agent_kernel" or module.startswith("agent_kernel."))


def describe(value: Any) -> str:
    """The type and shape of ``value``, never its contents; never raises.

    Example:
        >>> describe([1, 2, 3])
        'list, len 3'
    """
    kind = type(value)
    try:
        name = kind.__name__
        family = _family(kind)
        if family == "frame":
            rows, cols = value.shape
            # Plain lists first: slicing pandas objects costs more than the whole description.
            columns = [f"{_label(column)} ({dtype})" for column, dtype in zip(value.columns.tolist()[:_MAX_COLUMNS], _frame_dtypes(value, cols)[:_MAX_COLUMNS])]
            if cols > _MAX_COLUMNS:
                columns.append(f"... {cols - _MAX_COLUMNS} more")
            return f"{name}, {rows} rows x {cols} columns: {', '.join(columns)}"
        if family in ("series", "index"):
            label = value.name
            shown = "" if label is None else f", name {label!r}" if type(label) is str and label == _label(label) else f", name {_label(label)}"
            return f"{name}, length {value.shape[0]}, dtype {value.dtype}{shown}"
        if family == "array":
            return f"{name}, shape {tuple(value.shape)}, dtype {value.dtype}"
        if getattr(kind, "__len__", None) in _SAFE_LENS:
            return f"{name}, len {len(value)}"
        return name
    except Exception:  # whatever went wrong, the type is all there is to say
        return _type_name(kind)


def _frame_dtypes(frame: Any, cols: int) -> list[Any]:
    """A DataFrame's column dtypes, in order. Its block manager has them at once; ``frame.dtypes``
    builds a Series of them first, which costs a hundred times more (this runs before every prompt
    for each new or changed frame)."""
    try:
        dtypes = frame._mgr.get_dtypes()
        if len(dtypes) == cols:
            return list(dtypes)
    except Exception:  # another pandas, or a frame that keeps its columns otherwise
        pass
    return list(frame.dtypes)


def _type_name(kind: type) -> str:
    try:
        return str(kind.__name__)
    except Exception:  # a metaclass may make even this raise
        return "object"


def _module(kind: type) -> str:
    """The module ``kind`` says it comes from ("" when it says nothing usable)."""
    try:
        module = kind.__module__
    except Exception:
        return ""
    return module if isinstance(module, str) else ""


_FAMILIES: dict[type, str | None] = {}  # a cache of _family, emptied when it grows large
_UNKNOWN = "?"


def _family(kind: type) -> str | None:
    """What ``kind`` is to a reminder: ``frame``, ``series``, ``index`` (pandas), ``array``
    (numpy), or None for anything else. Only the type and its bases are asked."""
    family = _FAMILIES.get(kind, _UNKNOWN)
    if family is _UNKNOWN:
        if len(_FAMILIES) >= 1_024:
            _FAMILIES.clear()
        family = _FAMILIES[kind] = _find_family(kind)
    return family


def _find_family(kind: type) -> str | None:
    try:
        for base in kind.__mro__:
            module = _module(base)
            if module == "pandas" or module.startswith("pandas."):
                family = _PANDAS_FAMILIES.get(base.__name__)
                if family is not None:
                    return family
            elif (module == "numpy" or module.startswith("numpy.")) and base.__name__ == "ndarray":
                return "array"
    except Exception:  # a type that will not say what it derives from
        return None
    return None


_PANDAS_FAMILIES = {"DataFrame": "frame", "Series": "series", "Index": "index"}


def _label(label: Any) -> str:
    """A column or series label as shown: plain values as they are, others by their type."""
    if type(label) in (int, float, bool):
        return str(label)
    if type(label) is str:
        text = label if label.isprintable() else repr(label)
        return text if len(text) <= _MAX_LABEL_CHARS else text[: _MAX_LABEL_CHARS - 3] + "..."
    if type(label) is tuple:  # a MultiIndex column
        return "(" + ", ".join(_label(part) for part in label) + ")"
    return _type_name(type(label))


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
            if not visible(name, value):
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
    """What changes when a frame, a series, an index or an array changes in place (None: not one,
    or it could not be told). Only attributes these types define are read (pandas' own
    ``__getattr__`` is slow, and an accessor's would give a fresh object each time)."""
    try:
        kind = type(value)
        family = _FAMILIES.get(kind, _UNKNOWN)  # _family, inlined: this runs for every frame before every prompt
        if family is _UNKNOWN:
            family = _family(kind)
        if family is None:
            return None
        if family == "frame":
            return (value.shape, id(value.columns))
        if family == "series":
            return (value.shape, id(value.index), value.dtype)
        return (value.shape, value.dtype)
    except Exception:  # a broken object: it is not followed in place
        return None
