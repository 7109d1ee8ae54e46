"""journal.journal — the ``Journal`` writer: one session's events appended to a JSON Lines file.

File format (schema 1). The first line is a header object::

    {"schema": 1, "session_id": "s_...", "created": 1718000000.5, ...metadata}

and every following line is one ``AgentEvent.to_dict()`` in the layout ``journal.format`` states
(compact separators, ASCII only, the keys in ``FIELD_ORDER`` with ``data`` last), so the fast
reader (``journal.columns``) can split a line into its envelope and its payload without parsing
the payload; any JSON reader sees an ordinary object.

Round trip. Every event is written as its own record (deltas are not coalesced), so
``read_events(path)`` returns events equal to the ones written, field by field, whenever ``data``
holds JSON values (dict with string keys, list, str, int, float, bool, None). Tuples come back as
lists; a value JSON cannot hold is written as its ``str()`` rather than failing the run.

Buffering. ``write`` encodes the event at once (so later mutation of ``data`` cannot change the
record). The frequent events (per-token ``text_delta``, ``thinking_delta``, ``tool_call_delta``
and ``tool_progress``) wait in an in-memory buffer; any other event goes to the file at once,
together with everything buffered before it (one ``write`` system call). So the buffer reaches
the file when any of these happens first:

* an event other than those four is written (a few per model call or tool call: cheap);
* ``flush()``: the loop calls it at every turn boundary, ``sync()`` at the end of a run;
* a write finds that ``flush_interval`` (100 ms) has passed since the last flush;
* inside a running asyncio loop, a timer (``loop.call_later``) fires ``flush_interval`` after the
  first buffered line, so a quiet stream is not left in memory. No thread is started; outside an
  event loop the rules above and ``close()`` apply.

A process killed with SIGKILL loses at most the deltas of its last ``flush_interval``: whenever
the loop waits (for a tool, a person, the next turn), everything it emitted is already in the
file. Data written survives in the OS page cache; ``sync()`` adds an ``fsync`` for power loss.

Privacy: a journal holds prompts, tool output and file contents, so a new file is created ``0600``
and the folders made for it ``0700`` (readable by their owner only).

One writer per file: the open file holds an exclusive ``flock`` so a second ``Journal`` on the same
path (in this process or another) is refused with a ``JournalError`` instead of interleaving lines.
The lock is taken on the file the path names at that moment (checked again once it is held), and
every flush checks that the path still names that file (same device and inode), so a journal
whose folder was deleted or whose file was replaced stops rather than writing into a file nobody
can read, and a second writer on the new file cannot interleave with it.

Storage faults. A flush is all or nothing: the buffered lines leave the buffer only once they are
all in the file. A write that fails (disk full, a read-only or vanished file) is cut back to the
last whole line, the lines stay queued in order, and a ``JournalWriteError`` names the file, the
cause and what to do. It is raised once per fault (by the write that found it, and again by the
first ``run_start`` written while the fault lasts, and by ``flush()``), so the loop can end the run
with an ``error`` of kind ``journal``; the writes that follow queue quietly. The flush timer never
raises (the next write reports). Once the file takes writes again, the next flush writes
everything queued, so the journal holds every event, in order, with no fragment in between.

An unreachable ``Journal`` (an agent dropped without ``close()``) releases its descriptor and lock
when it is collected, with a ``ResourceWarning`` as an unclosed file gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import gc
import json
import os
import re
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

from agent_kernel.errors import JournalError, JournalWriteError, UserError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.guard._signing import SIGNATURE_FIELD, sign_header
from agent_kernel.journal._format import DATA_KEY, FIELD_ORDER, ITEM_SEPARATOR, KEY_SEPARATOR, LINE_END, SEQ_KEY, TS_KEY, id_section
from agent_kernel.journal._reader import JOURNAL_SCHEMA, TornLineWarning, check_schema, parse_header

try:  # the C encoder, built once: json.dumps rebuilds it on every call
    from json.encoder import c_make_encoder  # type: ignore[attr-defined]  # private, so not in typeshed
except ImportError:  # pragma: no cover - pure-Python builds of CPython
    c_make_encoder = None

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock; the lock is skipped there
    fcntl = None  # type: ignore[assignment]

SESSIONS_DIR = Path(".agent_kernel") / "sessions"

# The only events that wait in the buffer: they come per token (or per progress report).
_BUFFERED = frozenset({EventType.TEXT_DELTA, EventType.THINKING_DELTA, EventType.TOOL_CALL_DELTA, EventType.TOOL_PROGRESS})
# Each type's name with the text that follows it (one lookup per line on the hot path).
_TYPE_NAMES = {kind: kind.value + DATA_KEY for kind in EventType}
# The fields the fast line format writes. If AgentEvent ever gains a field, every event is written
# through AgentEvent.to_dict() instead (correct, slower) until journal.format learns it.
CANONICAL_FIELDS = ("seq", "ts", "session_id", "run_id", "turn_id", "parent_turn_id", "iteration", "type", "data", "agent_id")
_FAST = tuple(f.name for f in dataclasses.fields(AgentEvent)) == CANONICAL_FIELDS and sorted(CANONICAL_FIELDS) == sorted(FIELD_ORDER)
_HEADER_KEYS = frozenset({"schema", "session_id", "created", SIGNATURE_FIELD})
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)


if c_make_encoder is not None:
    _c_encode = c_make_encoder(None, _default, encode_basestring_ascii, None, KEY_SEPARATOR, ITEM_SEPARATOR, False, False, True)
else:  # pragma: no cover
    _py_encode = json.JSONEncoder(separators=(ITEM_SEPARATOR, KEY_SEPARATOR), default=_default).encode

    def _c_encode(value: Any, _level: int) -> list[str]:
        return [_py_encode(value)]


_join = "".join
_quote = encode_basestring_ascii  # what the encoder writes for a string, ASCII-only
_float_repr = float.__repr__  # the shortest text that reads back as the same float, as json writes it
_get_running_loop = asyncio._get_running_loop  # None outside a loop, without raising: cheap per write


def _encode(value: Any) -> str:
    return _join(_c_encode(value, 0))


def _encode_safely(value: Any) -> str:
    try:
        return _encode(value)
    except (TypeError, ValueError):
        # Non-string keys that JSON cannot hold: keep the record rather than fail the run.
        return json.dumps(value, separators=(ITEM_SEPARATOR, KEY_SEPARATOR), default=_default, skipkeys=True)


def _id_text(key: tuple[Any, ...]) -> str:
    """The JSON text between ``ts`` and the type name for ``key`` (the id fields)."""
    session_id, run_id, turn_id, parent_turn_id, iteration, agent_id = key
    return id_section(
        _encode_safely(session_id),
        _encode_safely(run_id),
        _encode_safely(turn_id),
        _encode_safely(parent_turn_id),
        str(int(iteration)),
        _encode_safely(agent_id),
    )


def event_line(event: AgentEvent) -> str:
    """The line the writer records for ``event``, newline included (the layout of ``journal.format``)."""
    kind = EventType(event.type)
    key = (event.session_id, event.run_id, event.turn_id, event.parent_turn_id, event.iteration, event.agent_id)
    return (
        f"{SEQ_KEY}{int(event.seq)}{TS_KEY}{float.__repr__(float(event.ts))}{_id_text(key)}{kind.value}"
        f"{DATA_KEY}{_encode_safely(event.data)}{LINE_END}"
    )


def _make_private_dirs(folder: Path) -> None:
    """Creates ``folder`` and missing parents as 0700 (``mkdir(parents=True)`` ignores the mode for parents)."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass


def session_path(session_id: str, working_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the journal of ``session_id`` lives by default: ``<working_dir>/.agent_kernel/sessions/<id>.jsonl``.

    Raises:
        JournalError: the session id cannot be a file name.
    """
    if not _SESSION_ID.match(session_id):
        raise JournalError(
            f"session id {session_id!r} cannot name a journal file; use letters, digits, '.', '_' "
            "and '-' (at most 128 characters, not starting with a dot)."
        )
    return Path(working_dir if working_dir is not None else Path.cwd()) / SESSIONS_DIR / f"{session_id}.jsonl"


def _signed(header: dict[str, Any]) -> dict[str, Any]:
    """``header`` (as it reads back) with this user's signature, so that ``Agent.resume`` knows it
    was written here (``guard._signing``); unsigned when the key cannot be had (resuming it then
    needs the person's word)."""
    try:
        return {**header, SIGNATURE_FIELD: sign_header(header)}
    except (UserError, OSError):
        return header


class Journal:
    """Appends one session's events to a JSON Lines file (see the module docstring for the format).

    Opening a path that already holds a journal continues it (resume): the header is kept,
    ``last_seq`` is the last recorded ``seq``, and a torn last line left by a crash is cut off
    (with a ``TornLineWarning``).

    Args:
        path: the ``.jsonl`` file; parent folders are created.
        session_id: written in the header of a new file; for an existing file it must match the
            header (``None`` accepts whatever the file holds, or uses the file name for a new one).
        metadata: extra header fields for a new file (model, system prompt, ...); ignored when
            continuing a file.
        flush_interval: the most seconds a written event may wait in memory (see module docstring).
        clock: a monotonic clock, injectable for tests.

    Raises:
        JournalError: another writer holds the file, the file is not a journal, or it belongs to
            another session.

    Example:
        >>> with Journal.for_session("s_demo", tmp_dir) as journal:  # doctest: +SKIP
        ...     journal.write(event)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        flush_interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.flush_interval = flush_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._buffer: list[str] = []
        self._mids: dict[tuple[Any, ...], str] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._fault: JournalWriteError | None = None  # the write failure not yet cleared by a flush
        self._fault_reported = False  # raised once already: later writes queue quietly
        # A journal holds prompts, tool output and file contents: only its owner may read it.
        try:
            _make_private_dirs(self.path.parent)
            self._fd = self._open_locked()
        except OSError as exc:
            raise _open_failure(self.path, exc) from None
        try:
            self.header, self.last_seq = self._open_contents(session_id, metadata)
            st = os.fstat(self._fd)
        except OSError as exc:
            os.close(self._fd)
            raise _open_failure(self.path, exc) from None
        except BaseException:
            os.close(self._fd)
            raise
        self._identity = (st.st_dev, st.st_ino)
        self._path_text = os.fspath(self.path)
        self._size = st.st_size  # the end of the last whole line written: a failed write is cut back here
        self.session_id: str = self.header["session_id"]
        self._flushed_at = clock()
        # Dropped without close(): the descriptor (and with it the lock) is released on collection.
        self._finalizer = weakref.finalize(self, _release_unclosed, self._fd, str(self.path), self._buffer)

    @classmethod
    def for_session(
        cls,
        session_id: str,
        working_dir: str | os.PathLike[str] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Journal:
        """Opens the journal at the default location of ``session_id`` (see ``session_path``)."""
        return cls(session_path(session_id, working_dir), session_id=session_id, metadata=metadata, **kwargs)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"last_seq={self.last_seq}"
        return f"Journal({str(self.path)!r}, session_id={self.session_id!r}, {state})"

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once ``close`` has been called."""
        return self._closed

    def _open_locked(self) -> int:
        """Opens the path and takes its lock, on the file the path still names once the lock is held.

        Between ``open`` and ``flock`` another process may replace the file (its folder deleted and
        made again): the lock would then guard a file nobody else can find. So the path is checked
        again after locking, and opened anew until the locked file is the one it names.
        """
        for attempt in range(100):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            except OSError as exc:
                if exc.errno != errno.EMFILE or attempt:
                    raise
                gc.collect()  # agents dropped without close() may hold the descriptors: free them
                continue
            try:
                self._lock_file(fd, retry=not attempt)
                held = os.fstat(fd)
                try:
                    named = os.stat(self.path)
                except FileNotFoundError:
                    named = None
            except BaseException:
                os.close(fd)
                raise
            if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
                return fd
            os.close(fd)  # the path was replaced while we locked: lock the file it names now
        raise JournalError(f"{self.path} keeps being replaced while it is opened; is another program rewriting it?")

    def _lock_file(self, fd: int, retry: bool = True) -> None:
        if fcntl is None:  # pragma: no cover
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if not retry:
                raise self._locked() from None
        # The holder may be a Journal in this process that nobody can reach (an agent dropped
        # without close(), in a reference cycle): collecting it releases the lock.
        gc.collect()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._locked() from None

    def _locked(self) -> JournalError:
        return JournalError(
            f"{self.path} is being written by another agent or kernel (its journal is locked). "
            "Use another session id, or close the other agent (agent.close()) before resuming "
            "this session here."
        )

    def _open_contents(self, session_id: str | None, metadata: Mapping[str, Any] | None) -> tuple[dict[str, Any], int]:
        size = os.fstat(self._fd).st_size
        if size == 0:
            return self._write_header(session_id, metadata), 0
        size = self._cut_torn_tail(size)
        if size == 0:
            return self._write_header(session_id, metadata), 0
        with open(self.path, "rb") as f:
            first = f.readline()
        header = parse_header(first)
        if header is None:
            raise JournalError(
                f"{self.path} is not an agent_kernel journal (its first line is not a header with a "
                "'schema' field). Choose another path, or move that file away."
            )
        check_schema(header, self.path)  # a newer agent_kernel's journal is not continued in an older layout
        if session_id is not None and header.get("session_id") != session_id:
            raise JournalError(
                f"{self.path} holds session {header.get('session_id')!r}, not {session_id!r}. Pass "
                "session_id=None to continue the session in the file, or choose another path."
            )
        return header, self._read_last_seq(size)

    def _write_header(self, session_id: str | None, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        extra = dict(metadata or {})
        clash = sorted(_HEADER_KEYS & extra.keys())
        if clash:
            raise JournalError(f"journal metadata may not set {', '.join(clash)}: those header fields are reserved.")
        header = {
            "schema": JOURNAL_SCHEMA,
            "session_id": session_id if session_id is not None else self.path.stem,
            "created": time.time(),
            **extra,
        }
        header = _signed(json.loads(_encode_safely(header)))
        self._write_bytes((_encode_safely(header) + "\n").encode("ascii"))
        return header

    def _cut_torn_tail(self, size: int) -> int:
        """Drops a last line that a crash left half-written; returns the new size."""
        start = max(0, size - 1)
        last = os.pread(self._fd, 1, start)
        if last == b"\n":
            return size
        # Everything after the last newline is a partial record.
        keep = self._line_start(size)
        tail = os.pread(self._fd, size - keep, keep)
        try:
            complete = isinstance(json.loads(tail), dict)
        except ValueError:
            complete = False
        if complete:  # the record was whole, only its newline was lost
            self._write_bytes(b"\n")
            return size + 1
        warnings.warn(
            TornLineWarning(
                f"{self.path}: dropped a torn last line ({size - keep} bytes) left by a crash mid-write; "
                "every complete record is kept."
            ),
            stacklevel=4,
        )
        os.ftruncate(self._fd, keep)
        return keep

    def _line_start(self, end: int) -> int:
        """The offset just past the last newline before ``end`` (0 if there is none)."""
        while end > 0:
            begin = max(0, end - 65536)
            nl = os.pread(self._fd, end - begin, begin).rfind(b"\n")
            if nl >= 0:
                return begin + nl + 1
            end = begin
        return 0

    def _read_last_seq(self, size: int) -> int:
        end = size - 1  # the final newline
        begin = self._line_start(end)
        line = os.pread(self._fd, end - begin, begin)
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise JournalError(
                f"the last line of {self.path} is not valid JSON ({exc}); the file was edited or damaged. "
                "Repair or remove that line, or start a new session."
            ) from None
        return int(record["seq"]) if "seq" in record else 0

    def _write_bytes(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def _envelope(self, key: tuple[Any, ...]) -> str:
        """The JSON text between ``ts`` and the type name for ``key`` (the id fields), cached."""
        if len(self._mids) > 256:  # a long session has many turns; keep the cache small
            self._mids.clear()
        mid = self._mids[key] = _id_text(key)
        return mid

    def write(self, event: AgentEvent) -> None:
        """Records ``event`` (cheap: encodes it and appends the line to a buffer).

        Raises:
            JournalError: the journal is closed.
            JournalWriteError: the file cannot take the events (the first write to find it out,
                or a ``run_start`` while the fault lasts); ``event`` is queued all the same.
        """
        if self._closed:
            raise JournalError(f"{self.path} is closed; open a new Journal to keep writing this session.")
        if not _FAST:
            self._buffer.append(_encode_safely(event.to_dict()) + "\n")
            self.last_seq = event.seq
            self.flush()
            return
        # The hot path (a text_delta per token): every step here is measured by benchmarks/journal.py.
        # The id fields only change between turns, so their JSON is cached per combination.
        key = (event.session_id, event.run_id, event.turn_id, event.parent_turn_id, event.iteration, event.agent_id)
        mid = self._mids.get(key) or self._envelope(key)
        kind = event.type
        data = event.data
        payload = None
        if type(data) is dict and len(data) == 1:
            ((name, value),) = data.items()
            if type(name) is str and type(value) is str:
                # A per-token delta: one string under one key (format.STRING_PAYLOAD_*). Quoting
                # it directly skips the encoder's per-call setup, a quarter of the cost of a line.
                payload = f"{{{_quote(name)}:{_quote(value)}}}"
        try:
            line = f"{SEQ_KEY}{event.seq:d}{TS_KEY}{_float_repr(event.ts)}{mid}{_TYPE_NAMES[kind]}{payload or _join(_c_encode(data, 0))}{LINE_END}"
        except (TypeError, ValueError, KeyError):
            line = self._line_safely(event)
        self._buffer.append(line)
        self.last_seq = event.seq
        if kind not in _BUFFERED or self._clock() - self._flushed_at >= self.flush_interval:
            fault = self._write_buffer()
            if fault is not None and (not self._fault_reported or kind is EventType.RUN_START):
                # Raised once per fault (and again to each run that starts while it lasts): the
                # loop ends the run with an error; the events after it queue quietly.
                self._fault_reported = True
                raise JournalWriteError(str(fault), path=fault.path, cause=fault.cause, event=event)
        else:
            loop = _get_running_loop()
            # A timer armed in another loop (one run_sync closed, say) will never fire here.
            if loop is not None and (self._timer is None or self._timer_loop is not loop):
                self._timer = loop.call_later(self.flush_interval, self._on_timer)
                self._timer_loop = loop

    def _line_safely(self, event: AgentEvent) -> str:
        """The line for an event the fast path refused (an int ``ts``, data JSON cannot hold)."""
        return event_line(event)

    def _on_timer(self) -> None:
        self._timer = None
        if not self._closed:
            # Never raises: an error here would go to the event loop's handler. A failure stays
            # queued with its lines, and the next write or flush reports it.
            self._write_buffer()

    def _write_buffer(self) -> JournalWriteError | None:
        """Writes the buffered lines (one system call); returns the failure, if any, instead of raising.

        All or nothing: the lines leave the buffer only once all of them are in the file. A write
        cut short is truncated back to the last whole line, so the file never holds a fragment.
        """
        with self._lock:
            self._flushed_at = self._clock()
            buffer = self._buffer
            # write() appends without the lock (list.append is atomic); lines appended by another
            # thread while this runs land after index n and stay for the next flush.
            n = len(buffer)
            if not n or self._closed:
                return None
            if not self._still_named():
                return self._failed(None, n)
            data = "".join(buffer[:n]).encode("ascii")
            try:
                if self._fault is not None and os.fstat(self._fd).st_size != self._size:
                    os.ftruncate(self._fd, self._size)  # a fragment a failed cut-back left behind
                self._write_bytes(data)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._size)
                return self._failed(exc, n)
            del buffer[:n]
            self._size += len(data)
            if self._fault is not None:  # the file takes writes again
                self._fault = None
                self._fault_reported = False
            return None

    def _still_named(self) -> bool:
        """True if the path still names the file this journal holds open (same device and inode)."""
        try:
            st = os.stat(self._path_text)  # one system call per flush, not per event
        except OSError:
            return False
        return st.st_ino == self._identity[1] and st.st_dev == self._identity[0]

    def _failed(self, cause: OSError | None, queued: int) -> JournalWriteError:
        self._fault = fault = JournalWriteError(_fault_message(self.path, cause, queued), path=self.path, cause=cause)
        return fault

    @property
    def fault(self) -> JournalWriteError | None:
        """The write failure the journal is in (its events wait in memory), or None when healthy."""
        return self._fault

    def flush(self) -> None:
        """Writes the buffered lines to the file (one system call).

        Raises:
            JournalWriteError: the file cannot take them; they stay queued (see the module docstring).
        """
        fault = self._write_buffer()
        if fault is not None:
            self._fault_reported = True
            raise fault

    def sync(self) -> None:
        """Flushes, then asks the OS to put the file on disk (``fsync``): the end-of-run guarantee.

        A write failure is not raised here (the run's end is being recorded; the lines stay queued
        and the failure was, or will be, reported by a write or ``flush``).
        """
        if self._write_buffer() is not None:
            return
        with self._lock:
            if not self._closed:
                try:
                    os.fsync(self._fd)
                except OSError as exc:
                    self._fault = JournalWriteError(_fault_message(self.path, exc, 0), path=self.path, cause=exc)

    def close(self) -> None:
        """Flushes and releases the file (and its lock). Safe to call twice.

        Events still queued by a write failure cannot be kept once the file is released: they are
        named in a ``JournalLostWarning``.
        """
        if self._closed:
            return
        fault = self._write_buffer()
        if self._timer is not None and self._timer_loop is _get_running_loop():
            self._timer.cancel()  # a handle belongs to its loop's thread; others just find it closed
        self._timer = None
        with self._lock:
            self._closed = True
            self._finalizer.detach()
            os.close(self._fd)  # closing the descriptor releases the flock
        if fault is not None:
            lost = len(self._buffer)
            self._buffer.clear()
            warnings.warn(
                JournalLostWarning(
                    f"{self.path} was closed with {lost} event{'s' if lost != 1 else ''} it could not write "
                    f"({fault.cause.strerror if fault.cause is not None else 'the file was deleted or replaced'}); "
                    "they are in agent.events only. Close the agent once the file can be written to keep them."
                ),
                stacklevel=2,
            )


class JournalLostWarning(UserWarning):
    """A journal was closed while events it could not write were queued; they are not in the file."""


def _release_unclosed(fd: int, path: str, buffer: list[str]) -> None:
    """Writes what a ``Journal`` collected without ``close()`` still buffered, then closes its
    descriptor (which releases its lock)."""
    with contextlib.suppress(OSError):
        if buffer:
            data = memoryview("".join(buffer).encode("ascii"))
            while data:
                data = data[os.write(fd, data):]
    with contextlib.suppress(OSError):
        os.close(fd)
    warnings.warn(f"unclosed journal {path!r}; call agent.close() (or use 'with Agent(...)') to release it", ResourceWarning, stacklevel=2)


def _fault_message(path: Path, cause: OSError | None, queued: int) -> str:
    waiting = f"{queued} event{'s' if queued != 1 else ''} wait{'s' if queued == 1 else ''} in memory"
    if cause is None:
        return (
            f"the journal {path} was deleted or replaced while this agent was writing it, so {waiting} with "
            "nowhere to go. Keep the folder in place while agents run; start a new session (agent.reset()) "
            "to record in a new file."
        )
    if cause.errno in (errno.ENOSPC, errno.EDQUOT):
        todo = "free space on that disk (or raise the quota)"
    elif cause.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        todo = "make the file and its folder writable (or remount the disk read-write)"
    else:
        todo = "fix the storage"
    return (
        f"cannot write the journal {path}: {cause.strerror or cause} [{errno.errorcode.get(cause.errno or 0, cause.errno)}]. "
        f"Nothing already recorded was damaged and {waiting}; {todo}, then run the agent again: it writes "
        "them first and goes on."
    )


def _open_failure(path: Path, cause: OSError) -> JournalWriteError:
    if cause.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        todo = "make the file and its folder writable, or pass journal= another folder (journal=None records nothing)"
    elif cause.errno in (errno.ENOSPC, errno.EDQUOT):
        todo = "free space on that disk, or pass journal= a folder on another disk"
    else:
        todo = "check the path, or pass journal= another folder (journal=None records nothing)"
    return JournalWriteError(
        f"cannot open the journal {path}: {cause.strerror or cause} [{errno.errorcode.get(cause.errno or 0, cause.errno)}]; {todo}.",
        path=path,
        cause=cause,
    )
