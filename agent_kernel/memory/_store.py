"""memory.store — MemoryStore: the long-term memory, a JSON file that outlives sessions.

The store lives at ``<working_dir>/.agent_kernel/memory/memory.json``. Each write goes to a
temporary file in the same folder, is fsynced, then replaces the old file with ``os.replace``, so
a crash leaves either the old file or the new one, never half of each. Before each write the
previous file is kept as a backup (``memory.json.1`` is the newest, up to ``backups`` of them).
A file that cannot be read as memory is never overwritten: it is moved aside
(``memory.json.corrupt-<time>``) with a ``MemoryCorruptWarning`` naming both paths, and the
store starts empty; when it cannot even be moved, every use of the store is a ``UserError``
saying so, until the file is moved or repaired by hand.

A change (``remember``, ``forget``) reads, modifies and writes the file while holding an
exclusive lock (``filelock`` on ``memory.json.lock`` beside it), so two kernels or threads
writing at once both keep their change. Reading needs no lock: the file is only ever replaced
whole.

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from agent_kernel._util.text import encodable
from agent_kernel.errors import UserError
from agent_kernel.events import payloads as p
from agent_kernel.events._event import Emit, EventType

#: Where long-term memory lives, under an agent's working directory.
MEMORY_DIR = Path(".agent_kernel") / "memory"
_FILE_NAME = "memory.json"
_FORMAT_VERSION = 1
MAX_KEY_CHARS = 100
MAX_CONTENT_CHARS = 10_000
#: Seconds a writer waits for another one to finish before giving up.
LOCK_TIMEOUT = 10.0
# What reading a damaged file can raise: bad JSON or UTF-8 (ValueError), nesting deeper than the
# parser goes (RecursionError), entries of the wrong shape, numbers too large for a float.
_UNREADABLE = (ValueError, TypeError, AttributeError, RecursionError, OverflowError)



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
        """An entry read from the file (``ValueError`` when it is not one).

        A lone surrogate (an escaped half pair in the JSON) becomes U+FFFD, so the file can
        always be written back.
        """
        key, content = data.get("key"), data.get("content")
        if not isinstance(key, str) or not isinstance(content, str):
            raise ValueError(f"an entry needs a string key and content, got {data!r:.200}")
        created = float(data.get("created", 0.0))
        return cls(encodable(key), encodable(content), created, float(data.get("updated", created)))


class MemoryStore:
    """Long-term memory: facts kept by key in a JSON file, with atomic writes and backups.

    Args:
        path: the JSON file (created, with its folder, on the first write).
        backups: how many earlier versions to keep beside it (``memory.json.1`` newest).
        lock_timeout: seconds a write waits for another writer before a ``UserError``.

    Example:
        >>> store = MemoryStore.in_dir(tmp_path)  # doctest: +SKIP
        >>> store.remember("units", "The user works in metric units.")  # doctest: +SKIP
        >>> [e.key for e in store.recall("metric")]  # doctest: +SKIP
        ['units']
    """

    def __init__(self, path: str | os.PathLike[str], *, backups: int = 3, lock_timeout: float = LOCK_TIMEOUT) -> None:
        if backups < 0:
            raise UserError(f"backups must be 0 or more, got {backups}.")
        self.path = Path(path)
        self.backups = backups
        self.lock_timeout = lock_timeout
        #: Problems met reading the file (a corrupt file moved aside), for the caller to report.
        self.problems: list[p.MemoryWarning] = []

    @classmethod
    def in_dir(cls, working_dir: str | os.PathLike[str], *, backups: int = 3, lock_timeout: float = LOCK_TIMEOUT) -> MemoryStore:
        """The store of ``working_dir``: ``<working_dir>/.agent_kernel/memory/memory.json``."""
        return cls(Path(working_dir) / MEMORY_DIR / _FILE_NAME, backups=backups, lock_timeout=lock_timeout)

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.path)!r})"

    # -- reading ----------------------------------------------------------------------------

    def entries(self) -> list[MemoryEntry]:
        """Every entry, in the order first remembered (read from the file each time: another
        session may write it).

        Raises:
            UserError: the file cannot be read and cannot be moved aside either.
        """
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
        if not isinstance(query, str):
            raise UserError(f"recall looks for words given as text, got {type(query).__name__}; pass \"\" to recall every memory.")
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
            emit(EventType.MEMORY_RECALL, p.MemoryRecall(query=query, keys=[e.key for e in found], path=str(self.path)))
        return found

    # -- writing ----------------------------------------------------------------------------

    def remember(self, key: str, content: str, *, emit: Emit | None = None) -> MemoryEntry:
        """Keeps ``content`` under ``key`` (replacing what the key held), and saves the file.

        Raises:
            UserError: the key or content is empty or too long, the key is not one line or holds
                ``<`` or ``>``, another writer holds the lock too long, or the file cannot be read.
        """
        key, content = _check_key(key), encodable(content.strip()) if isinstance(content, str) else content
        if not isinstance(content, str) or not content:
            raise UserError("remember needs some content: the fact to keep, as text.")
        if len(content) > MAX_CONTENT_CHARS:
            raise UserError(f"a memory holds at most {MAX_CONTENT_CHARS:,} characters (got {len(content):,}); keep the gist, or split it under several keys.")
        if emit is not None:
            emit(EventType.MEMORY_WRITE_START, p.MemoryWriteStart(op="remember", key=key, path=str(self.path)))
        with self._locked(create=True):
            entries = self._load(locked=True)
            now = time.time()
            old = entries.get(key)
            entry = MemoryEntry(key, content, old.created if old is not None else now, now)
            entries[key] = entry
            self._save(entries, emit)
        if emit is not None:
            emit(EventType.MEMORY_WRITE_COMPLETE, p.MemoryWriteComplete(op="remember", key=key, existed=old is not None, entries=len(entries)))
        return entry

    def forget(self, key: str, *, emit: Emit | None = None) -> bool:
        """Removes the entry called ``key``; returns False (and writes nothing) when there is none."""
        key = _check_key(key)
        if emit is not None:
            emit(EventType.MEMORY_WRITE_START, p.MemoryWriteStart(op="forget", key=key, path=str(self.path)))
        with self._locked(create=False):
            entries = self._load(locked=True)
            existed = entries.pop(key, None) is not None
            if existed:
                self._save(entries, emit)
        if emit is not None:
            emit(EventType.MEMORY_WRITE_COMPLETE, p.MemoryWriteComplete(op="forget", key=key, existed=existed, entries=len(entries)))
        return existed

    def backup_paths(self) -> list[Path]:
        """The backups that exist, newest first."""
        return [p for p in (self._backup(i) for i in range(1, self.backups + 1)) if p.exists()]

    # -- the file ---------------------------------------------------------------------------

    def _backup(self, number: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{number}")

    @contextlib.contextmanager
    def _locked(self, *, create: bool) -> Iterator[None]:
        """Holds the store's write lock (``memory.json.lock``) for one read-modify-write.

        Args:
            create: make the folder when it is missing (else a missing folder needs no lock:
                there is nothing to change).

        Raises:
            UserError: another writer held the lock for ``lock_timeout`` seconds.
        """
        folder = self.path.parent
        if create:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(
                    f"The memory folder {folder} could not be made ({type(exc).__name__}: {exc}); long-term memory needs "
                    "a folder it can write to under the working directory. Fix or remove what is in the way."
                ) from None
        elif not folder.is_dir():
            yield
            return
        lock_path = self.path.with_name(f"{self.path.name}.lock")
        lock = filelock.FileLock(lock_path, timeout=self.lock_timeout)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise UserError(_locked_message(lock_path, self.lock_timeout)) from None
        except OSError as exc:
            raise UserError(
                f"The memory lock {lock_path} could not be opened ({type(exc).__name__}: {exc}); long-term memory "
                f"needs a folder it can write to. Check the permissions of {folder}."
            ) from None
        try:
            yield
        finally:
            lock.release()

    def _load(self, *, locked: bool = False) -> dict[str, MemoryEntry]:
        """The entries by key; an unreadable file is moved aside (under the lock) and reads as empty.

        Args:
            locked: the caller holds the write lock.
        """
        try:
            return self._read()
        except _Damaged as damaged:
            if locked:
                self._move_aside(damaged.error)
                return {}
        # A writer may have replaced the file meanwhile: look again under the lock before moving it.
        with self._locked(create=False):
            try:
                return self._read()
            except _Damaged as damaged:
                self._move_aside(damaged.error)
                return {}

    def _read(self) -> dict[str, MemoryEntry]:
        """The entries by key (raises ``_Damaged`` when the file cannot be read as memory)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:  # a folder, a file this user may not read, a failing disk
            raise _Damaged(exc) from None
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
                raise ValueError("no 'entries' list at the top level")
            entries = [MemoryEntry.from_dict(item) for item in data["entries"]]
        except _UNREADABLE as exc:
            raise _Damaged(exc) from None
        return {entry.key: entry for entry in entries}

    def _move_aside(self, error: BaseException) -> None:
        """Keeps an unreadable file under a new name, so no later write overwrites it.

        Raises:
            UserError: it cannot be moved either; the store is unusable until it is moved by hand.
        """
        problem = f"{type(error).__name__}: {str(error)[:300]}"
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while os.path.lexists(target):
            n += 1
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        try:
            os.replace(self.path, target)
        except FileNotFoundError:  # another reader moved it aside first
            return
        except OSError as exc:
            raise UserError(
                f"The memory file {self.path} could not be read ({problem}) and could not be moved aside "
                f"({type(exc).__name__}: {exc}), so long-term memory cannot be used. Move or repair it by hand "
                f"(or delete it to start empty), then try again; {self.path.name}.1 is the newest backup."
            ) from None
        message = (
            f"The memory file {self.path} could not be read ({problem}); it was moved to "
            f"{target} and memory starts empty. Repair that file and move it back, or copy entries from a backup "
            f"({self.path.name}.1 is the newest)."
        )
        self.problems.append(p.MemoryWarning(path=str(self.path), moved_to=str(target), message=message))
        warnings.warn(MemoryCorruptWarning(message), stacklevel=4)

    def _save(self, entries: dict[str, MemoryEntry], emit: Emit | None) -> None:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        # Encoded first: a write that cannot be encoded must leave the backups as they were.
        payload = json.dumps(
            {"version": _FORMAT_VERSION, "entries": [e.to_dict() for e in entries.values()]}, ensure_ascii=False, indent=1
        ).encode("utf-8")
        backup = self._rotate_backups()
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
            emit(EventType.MEMORY_SAVED, p.MemorySaved(path=str(self.path), entries=len(entries), bytes=len(payload), backup=backup))

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


class _Damaged(Exception):
    """The memory file cannot be read as memory; ``error`` says why."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _locked_message(lock_path: Path, timeout: float) -> str:
    return (
        f"The memory file is locked by another writer (waited {timeout:g} s for {lock_path}); try again in a moment. "
        "If no other kernel or process is using this memory, the lock is stale: delete that file."
    )


def _check_key(key: Any) -> str:
    """The key, stripped: one line of printable characters, without ``<`` or ``>``.

    Raises:
        UserError: it is empty, too long, or not such a line.
    """
    if not isinstance(key, str) or not key.strip():
        raise UserError("a memory needs a key: a short name such as 'preferred-units'.")
    key = key.strip()
    if len(key) > MAX_KEY_CHARS:
        raise UserError(f"a memory key is at most {MAX_KEY_CHARS} characters (got {len(key)}); use a short name.")
    if "<" in key or ">" in key or not key.isprintable():
        raise UserError(
            f"a memory key is one line of letters, digits, spaces and punctuation, without '<' or '>' "
            f"(got {key!r:.80}); use a short name such as 'preferred-units' and put the details in the content."
        )
    return key
