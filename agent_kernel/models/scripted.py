"""models.scripted — deterministic offline models for tests, notebooks and benchmarks.

``ScriptedModel`` plays back a list of responses, one per model call; ``FunctionModel`` computes
each response from the request with a function. Both stream like a real model (in chunks, with
optional delays) and record every request in ``model.requests``.

Example:
    >>> from agent_kernel.models.scripted import ScriptedModel, text, tool_call
    >>> model = ScriptedModel([[text("Looking."), tool_call("add", {"a": 2, "b": 3})], "The sum is 5."])
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from agent_kernel.errors import ModelError
from agent_kernel.messages import Message
from agent_kernel.models._base import MessageEnd, ModelRequest, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolSpec, Usage

__all__ = [
    "Fail",
    "FunctionModel",
    "Part",
    "ScriptedModel",
    "Stall",
    "Stop",
    "Text",
    "Thinking",
    "ToolCall",
    "fail",
    "stall",
    "stop",
    "text",
    "thinking",
    "tool_call",
]


@dataclass(frozen=True)
class Text:
    """Streams ``content`` in chunks of ``chunk`` characters, sleeping ``delay`` before each."""

    content: str
    chunk: int = 8
    delay: float = 0.0


@dataclass(frozen=True)
class Thinking:
    """Streams reasoning text, then its ``signature``."""

    content: str
    chunk: int = 8
    delay: float = 0.0
    signature: str | None = "scripted-signature"


@dataclass(frozen=True)
class ToolCall:
    """Streams one tool call; ``args`` is a dict, or a raw string to script malformed JSON."""

    name: str
    args: dict[str, Any] | str
    id: str | None = None
    chunk: int = 16
    delay: float = 0.0


@dataclass(frozen=True)
class Fail:
    """Raises a ``ModelError`` at this point of the stream."""

    kind: str = "server"
    message: str | None = None
    retryable: bool | None = None
    status_code: int | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class Stall:
    """Pauses the stream for ``seconds`` (to exercise the stall watchdog)."""

    seconds: float


@dataclass(frozen=True)
class Stop:
    """Ends the response with this stop reason (``max_tokens``, ``refusal``, ...)."""

    reason: str


Part = Union[Text, Thinking, ToolCall, Fail, Stall, Stop]
Response = Union[str, Part, Sequence[Part]]

# kind -> (status, retryable, overloaded, default message)
_FAILURES: dict[str, tuple[int | None, bool, bool, str]] = {
    "rate_limit": (429, True, False, "rate limited (429)"),
    "server": (500, True, False, "internal server error (500)"),
    "bad_gateway": (502, True, False, "bad gateway (502)"),
    "unavailable": (503, True, False, "service unavailable (503)"),
    "gateway_timeout": (504, True, False, "gateway timeout (504)"),
    "overloaded": (529, True, True, "overloaded (529)"),
    "connection": (None, True, False, "connection dropped"),
    "stream_cut": (None, True, False, "the stream was cut mid-way"),
    "bad_request": (400, False, False, "bad request (400)"),
    "auth": (401, False, False, "authentication failed (401)"),
    "permission": (403, False, False, "permission denied (403)"),
    "not_found": (404, False, False, "model not found (404)"),
    "context_length": (400, False, False, "prompt is too long for the context window"),
}


def text(content: str, *, chunk: int = 8, delay: float = 0.0) -> Text:
    """A text part streamed in ``chunk``-character deltas, ``delay`` seconds apart."""
    return Text(content, chunk, delay)


def thinking(
    content: str, *, chunk: int = 8, delay: float = 0.0, signature: str | None = "scripted-signature"
) -> Thinking:
    """A thinking part (reasoning) followed by its signature."""
    return Thinking(content, chunk, delay, signature)


def tool_call(
    name: str, args: dict[str, Any] | str | None = None, *, id: str | None = None, chunk: int = 16, delay: float = 0.0
) -> ToolCall:
    """A tool call; ``args`` may be a raw string to script arguments that are not valid JSON."""
    return ToolCall(name, {} if args is None else args, id, chunk, delay)


def fail(
    kind: str = "server",
    message: str | None = None,
    *,
    retryable: bool | None = None,
    status_code: int | None = None,
    retry_after: float | None = None,
) -> Fail:
    """A failure at this point of the stream. ``kind`` is one of: ``rate_limit``, ``server``,
    ``bad_gateway``, ``unavailable``, ``gateway_timeout``, ``overloaded``, ``connection``,
    ``stream_cut`` (retryable) or ``bad_request``, ``auth``, ``permission``, ``not_found``,
    ``context_length`` (not retryable)."""
    if kind not in _FAILURES:
        raise ValueError(f"unknown failure kind {kind!r}; use one of: {', '.join(_FAILURES)}")
    return Fail(kind, message, retryable, status_code, retry_after)


def stall(seconds: float) -> Stall:
    """A pause of ``seconds`` with no stream event."""
    return Stall(seconds)


def stop(reason: str) -> Stop:
    """Ends the response with ``reason`` as its stop reason, e.g. ``stop("max_tokens")``."""
    return Stop(reason)


def _as_parts(response: Response) -> list[Part]:
    if isinstance(response, str):
        return [Text(response)]
    if isinstance(response, (Text, Thinking, ToolCall, Fail, Stall, Stop)):
        return [response]
    return list(response)


def _chunks(s: str, size: int) -> list[str]:
    size = max(1, size)
    return [s[i : i + size] for i in range(0, len(s), size)] or [""]


class _SizeMemo:
    """Remembers the character count of the last request's messages.

    Conversations grow by appending, so the next request usually extends the last one: then
    only the new messages are measured and a long session costs the same per call as a short one.
    """

    __slots__ = ("messages", "chars")

    def __init__(self) -> None:
        self.messages: tuple[Message, ...] = ()
        self.chars = 0

    def measure(self, messages: tuple[Message, ...]) -> int:
        prev, n = self.messages, len(self.messages)
        if n and len(messages) >= n and all(a is b for a, b in zip(prev, messages)):
            chars = self.chars + sum(m.char_count() for m in messages[n:])
        else:
            chars = sum(m.char_count() for m in messages)
        self.messages, self.chars = messages, chars
        return chars


def estimate_request_tokens(request: ModelRequest, memo: _SizeMemo | None = None) -> int:
    """A rough input token count (4 characters a token) for offline usage figures."""
    chars = len(request.system or "")
    chars += memo.measure(request.messages) if memo is not None else sum(m.char_count() for m in request.messages)
    chars += sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in request.tools)
    return max(1, chars // 4)


def _error(part: Fail) -> ModelError:
    status, retryable, overloaded, default = _FAILURES[part.kind]
    return ModelError(
        f"scripted failure: {part.message or default}",
        retryable=retryable if part.retryable is None else part.retryable,
        status_code=part.status_code if part.status_code is not None else status,
        retry_after=part.retry_after,
        overloaded=overloaded,
        kind=part.kind,
    )


async def stream_parts(
    parts: Sequence[Part], request: ModelRequest, call_index: int, model: str, memo: _SizeMemo | None = None
) -> AsyncIterator[StreamEvent]:
    """Streams scripted parts as model stream events (shared by the offline models)."""
    out_chars = 0
    n_tools = 0
    reason: str | None = None
    for pi, part in enumerate(parts):
        if isinstance(part, Text):
            for piece in _chunks(part.content, part.chunk):
                if part.delay:
                    await asyncio.sleep(part.delay)
                out_chars += len(piece)
                yield TextDelta(piece)
        elif isinstance(part, Thinking):
            for piece in _chunks(part.content, part.chunk):
                if part.delay:
                    await asyncio.sleep(part.delay)
                out_chars += len(piece)
                yield ThinkingDelta(piece)
            if part.signature:
                yield ThinkingDelta("", part.signature)
        elif isinstance(part, ToolCall):
            call_id = part.id or f"call_{call_index}_{pi}"
            raw = part.args if isinstance(part.args, str) else json.dumps(part.args)
            yield ToolCallStart(n_tools, call_id, part.name)
            for piece in _chunks(raw, part.chunk):
                if part.delay:
                    await asyncio.sleep(part.delay)
                yield ToolCallDelta(n_tools, piece)
            out_chars += len(raw) + len(part.name)
            yield ToolCallEnd(n_tools, call_id, part.name, raw)
            n_tools += 1
        elif isinstance(part, Stall):
            await asyncio.sleep(part.seconds)
        elif isinstance(part, Fail):
            raise _error(part)
        elif isinstance(part, Stop):
            reason = part.reason
        else:
            raise TypeError(f"not a scripted part: {part!r}; use text(), thinking(), tool_call(), fail() or stall()")
    usage = Usage(input_tokens=estimate_request_tokens(request, memo), output_tokens=max(1, out_chars // 4))
    yield MessageEnd(reason or ("tool_use" if n_tools else "end_turn"), usage, model)


class ScriptedModel:
    """Plays back ``responses``, one per model call, streaming each like a real model.

    Each item is one response: a bare string (a text response), one part, or a list of parts
    made with ``text``, ``thinking``, ``tool_call``, ``fail``, ``stall`` and ``stop``. Every request is
    recorded in ``requests``. Running out of responses is a non-retryable ``ModelError``.

    Args:
        responses: the responses, in call order.
        name: the model name reported in events.
        context_window: tokens accepted per request (for context management).
    """

    provider = "scripted"

    def __init__(self, responses: Sequence[Response], *, name: str = "scripted", context_window: int = 200_000) -> None:
        self.responses: list[list[Part]] = [_as_parts(r) for r in responses]
        self.name = name
        self.context_window = context_window
        self.requests: list[ModelRequest] = []
        self._sizes = _SizeMemo()

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.responses)} responses, {len(self.requests)} used)"

    @property
    def remaining(self) -> int:
        """Responses not yet played."""
        return len(self.responses) - len(self.requests)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Streams the next scripted response."""
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.responses):
            raise ModelError(
                f"ScriptedModel has no response left for call {index + 1} (it was given "
                f"{len(self.responses)}); add more responses to the script.",
                kind="script_exhausted",
            )
        return stream_parts(self.responses[index], request, index, self.name, self._sizes)


PartsFunction = Callable[[list[Message], list[ToolSpec]], Any]


class FunctionModel:
    """Computes each response with ``function(messages, tools)``, sync or async.

    The function returns what ``ScriptedModel`` accepts as one response: a string, a part, or a
    list of parts.
    """

    provider = "function"

    def __init__(self, function: PartsFunction, *, name: str = "function", context_window: int = 200_000) -> None:
        self.function = function
        self.name = name
        self.context_window = context_window
        self.requests: list[ModelRequest] = []
        self._sizes = _SizeMemo()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Streams the function's response to ``request``."""
        index = len(self.requests)
        self.requests.append(request)
        result = self.function(list(request.messages), list(request.tools))
        if inspect.isawaitable(result):
            result = await result
        async for event in stream_parts(_as_parts(result), request, index, self.name, self._sizes):
            yield event
