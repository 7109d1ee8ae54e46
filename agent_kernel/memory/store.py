"""memory.store — MemoryStore: the long-term memory, a JSON file that outlives sessions.

The store lives at ``<working_dir>/.agent_kernel/memory/memory.json``. Each write goes to a
temporary file in the same folder, is fsynced, then replaces the old file with ``os.replace``, so
a crash leaves either the old file or the new one, never half of each. Before each write the
previous file is kept as a backup (``memory.json.1`` is the newest, up to ``backups`` of them).
A file that cannot be read as memory is never overwritten: it is moved aside
(``memory.json.corrupt-<time>``) with a ``MemoryCorruptWarning`` naming both paths, and the
store starts empty.

Every method that changes the store takes an optional ``emit(EventType, data)``; through it the
store reports its steps as they happen (``memory_write_start``, ``memory_saved``,
``memory_write_complete``), the way the rest of the kernel streams its work as events.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..events import EventType

__all__ = [
    "MEMORY_DIR",
    "MemoryCorruptWarning",
    "MemoryEntry",
    "MemoryStore",
]

#: Where long-term memory lives, under an agent's working directory.
MEMORY_DIR = Path(".agent_kernel") / "memory"
_FILE_NAME = "memory.json"
_FORMAT_VERSION = 1
MAX_KEY_CHARS = 100
MAX_CONTENT_CHARS = 10_000

Emit = Callable[[EventType, dict[str, Any]], Any]


class MemoryCorruptWarning(UserWarning):
    """The memory file could not be read; it was moved aside and the store started empty."""


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One remembered fact.

    Attributes:
        key: a short name, unique in the store (``"preferred-units"``).
        content: what is remembered.
        created: epoch seconds when the key was first remembered.
        updated: epoch seconds of the last change.
    """

    key: str
    content: str
    created: float
    updated: float

    def to_dict(self) -> dict[str, Any]:
        """The entry as written in the file."""
        return {"key": self.key, "content": self.content, "created": self.created, "updated": self.updated}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryEntry:
        """An entry read from the file (``ValueError`` when it is not one)."""
        key, content = data.get("key"), data.get("content")
        if not isinstance(key, str) or not isinstance(content, str):
            raise ValueError(f"an entry needs a string key and content, got {data!r:.200}")
        created = float(data.get("created", 0.0))
        return cls(key, content, created, float(data.get("updated", created)))


class MemoryStore:
    """Long-term memory: facts kept by key in a JSON file, with atomic writes and backups.

    Args:
        path: the JSON file (created, with its folder, on the first write).
        backups: how many earlier versions to keep beside it (``memory.json.1`` newest).

    Example:
        >>> store = MemoryStore.in_dir(tmp_path)  # doctest: +SKIP
        >>> store.remember("units", "The user works in metric units.")  # doctest: +SKIP
        >>> [e.key for e in store.recall("metric")]  # doctest: +SKIP
        ['units']
    """

    def __init__(self, path: str | os.PathLike[str], *, backups: int = 3) -> None:
        if backups < 0:
            raise UserError(f"backups must be 0 or more, got {backups}.")
        self.path = Path(path)
        self.backups = backups
        #: Problems met reading the file (a corrupt file moved aside), for the caller to report.
        self.problems: list[dict[str, str]] = []

    @classmethod
    def in_dir(cls, working_dir: str | os.PathLike[str], *, backups: int = 3) -> MemoryStore:
        """The store of ``working_dir``: ``<working_dir>/.agent_kernel/memory/memory.json``."""
        return cls(Path(working_dir) / MEMORY_DIR / _FILE_NAME, backups=backups)

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.path)!r})"

    # -- reading ----------------------------------------------------------------------------

    def entries(self) -> list[MemoryEntry]:
        """Every entry, oldest first (read from the file each time: another session may write it)."""
        return list(self._load().values())

    def __len__(self) -> int:
        return len(self._load())

    def get(self, key: str) -> MemoryEntry | None:
        """The entry called ``key``, or None."""
        return self._load().get(key)

    def recall(self, query: str = "", *, limit: int | None = None, emit: Emit | None = None) -> list[MemoryEntry]:
        """The entries matching every word of ``query`` (in key or content, any case), best first.

        An empty query recalls every entry. Entries are ranked by how often the words occur, then
        by how recently they changed.
        """
        words = [w for w in re.split(r"\W+", query.lower()) if w]
        scored: list[tuple[int, float, MemoryEntry]] = []
        for entry in self._load().values():
            text = f"{entry.key} {entry.content}".lower()
            hits = [text.count(w) for w in words]
            if all(hits):
                scored.append((sum(hits), entry.updated, entry))
        scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
        found = [entry for _, _, entry in scored][:limit]
        if emit is not None:
            emit(EventType.MEMORY_RECALL, {"query": query, "keys": [e.key for e in found], "path": str(self.path)})
        return found

    # -- writing ----------------------------------------------------------------------------

    def remember(self, key: str, content: str, *, emit: Emit | None = None) -> MemoryEntry:
        """Keeps ``content`` under ``key`` (replacing what the key held), and saves the file.

        Raises:
            UserError: the key or content is empty or too long.
        """
        key, content = _check_key(key), content.strip() if isinstance(content, str) else content
        if not isinstance(content, str) or not content:
            raise UserError("remember needs some content: the fact to keep, as text.")
        if len(content) > MAX_CONTENT_CHARS:
            raise UserError(f"a memory holds at most {MAX_CONTENT_CHARS:,} characters (got {len(content):,}); keep the gist, or split it under several keys.")
        if emit is not None:
            emit(EventType.MEMORY_WRITE_START, {"op": "remember", "key": key, "path": str(self.path)})
        entries = self._load()
        now = time.time()
        old = entries.get(key)
        entry = MemoryEntry(key, content, old.created if old is not None else now, now)
        entries[key] = entry
        self._save(entries, emit)
        if emit is not None:
            emit(EventType.MEMORY_WRITE_COMPLETE, {"op": "remember", "key": key, "existed": old is not None, "entries": len(entries)})
        return entry

    def forget(self, key: str, *, emit: Emit | None = None) -> bool:
        """Removes the entry called ``key``; returns False (and writes nothing) when there is none."""
        key = _check_key(key)
        if emit is not None:
            emit(EventType.MEMORY_WRITE_START, {"op": "forget", "key": key, "path": str(self.path)})
        entries = self._load()
        existed = entries.pop(key, None) is not None
        if existed:
            self._save(entries, emit)
        if emit is not None:
            emit(EventType.MEMORY_WRITE_COMPLETE, {"op": "forget", "key": key, "existed": existed, "entries": len(entries)})
        return existed

    def backup_paths(self) -> list[Path]:
        """The backups that exist, newest first."""
        return [p for p in (self._backup(i) for i in range(1, self.backups + 1)) if p.exists()]

    # -- the file ---------------------------------------------------------------------------

    def _backup(self, number: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{number}")

    def _load(self) -> dict[str, MemoryEntry]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
                raise ValueError("no 'entries' list at the top level")
            entries = [MemoryEntry.from_dict(item) for item in data["entries"]]
        except (ValueError, TypeError, AttributeError) as exc:
            self._move_aside(exc)
            return {}
        return {entry.key: entry for entry in entries}

    def _move_aside(self, error: Exception) -> None:
        """Keeps an unreadable file under a new name, so no later write overwrites it."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            n += 1
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        os.replace(self.path, target)
        message = (
            f"The memory file {self.path} could not be read ({type(error).__name__}: {error}); it was moved to "
            f"{target} and memory starts empty. Repair that file and move it back, or copy entries from a backup "
            f"({self.path.name}.1 is the newest)."
        )
        self.problems.append({"path": str(self.path), "moved_to": str(target), "message": message})
        warnings.warn(MemoryCorruptWarning(message), stacklevel=4)

    def _save(self, entries: dict[str, MemoryEntry], emit: Emit | None) -> None:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        backup = self._rotate_backups()
        payload = json.dumps(
            {"version": _FORMAT_VERSION, "entries": [e.to_dict() for e in entries.values()]}, ensure_ascii=False, indent=1
        ).encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if emit is not None:
            emit(EventType.MEMORY_SAVED, {"path": str(self.path), "entries": len(entries), "bytes": len(payload), "backup": backup})

    def _rotate_backups(self) -> str | None:
        """Shifts the backups one place and copies the current file to ``.1``; its path, or None."""
        if self.backups == 0 or not self.path.exists():
            return None
        for number in range(self.backups, 1, -1):
            older = self._backup(number - 1)
            if older.exists():
                os.replace(older, self._backup(number))
        newest = self._backup(1)
        newest.write_bytes(self.path.read_bytes())
        return str(newest)


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise UserError("a memory needs a key: a short name such as 'preferred-units'.")
    key = key.strip()
    if len(key) > MAX_KEY_CHARS:
        raise UserError(f"a memory key is at most {MAX_KEY_CHARS} characters (got {len(key)}); use a short name.")
    return key
