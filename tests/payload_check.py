"""Checks the ``data`` of every event an ``Emitter`` builds against its ``PAYLOADS`` type.

The check wraps ``Emitter.emit`` and ``Emitter.later`` for the length of a test (see
``conftest._payloads_match_their_types``), so every event the suite emits, in every module, is
held to the documented keys: no unknown key, every required key, and values of the declared
types (pydantic, strict).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import pydantic

from agent_kernel.events._event import PAYLOADS, EventType
from agent_kernel.runtime._emitter import Emitter


@functools.cache
def _adapter(payload: type) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(payload)


def payload_problem(event_type: EventType, data: dict[str, Any]) -> str | None:
    """Why ``data`` does not match ``PAYLOADS[event_type]``, or None when it does."""
    payload = PAYLOADS[event_type]
    unknown = sorted(set(data) - set(payload.__annotations__))
    if unknown:
        return f"{event_type.value}: undocumented keys {unknown} (add them to agent_kernel/payloads.py)"
    missing = sorted(payload.__required_keys__ - set(data))  # type: ignore[attr-defined]
    if missing:
        return f"{event_type.value}: missing required keys {missing}"
    try:
        _adapter(payload).validate_python(data, strict=True)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        return f"{event_type.value}: {'.'.join(map(str, first['loc']))}: {first['msg']} (got {first.get('input')!r:.80})"
    return None


@contextlib.contextmanager
def check_emitted_payloads() -> Iterator[list[str]]:
    """Collects, for the block's length, every emitted event whose data breaks its type."""
    violations: list[str] = []
    emit, later = Emitter.emit, Emitter.later

    def checked_emit(self: Emitter, type: EventType, data: dict[str, Any], ts: float | None = None, turn: Any = None) -> Any:
        problem = payload_problem(type, data)
        if problem is not None:
            violations.append(problem)
        return emit(self, type, data, ts, turn)

    def checked_later(self: Emitter, type: EventType, data: dict[str, Any]) -> None:
        problem = payload_problem(type, data)
        if problem is not None:
            violations.append(problem)
        later(self, type, data)

    Emitter.emit, Emitter.later = checked_emit, checked_later  # type: ignore[method-assign]
    try:
        yield violations
    finally:
        Emitter.emit, Emitter.later = emit, later  # type: ignore[method-assign]


class EmitRecorder:
    """An ``emit(type, data)`` callback for code tested without an ``Emitter`` (the permission
    gate, say): records each event, held to its payload type like every emitted event."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, dict[str, Any]]] = []

    def __call__(self, type: EventType, data: dict[str, Any]) -> None:
        problem = payload_problem(type, data)
        assert problem is None, problem
        self.events.append((type, data))

    def of(self, type: EventType) -> list[dict[str, Any]]:
        """The data of the recorded events of ``type``, in order."""
        return [d for t, d in self.events if t is type]
