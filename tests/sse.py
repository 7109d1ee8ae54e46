"""Server-sent-event bytes and mock transports, to drive the real provider SDKs in tests.

The SDKs parse real wire bytes here: a test builds a provider's SSE body (``anthropic_sse``,
``openai_sse``), serves it through an ``httpx2.MockTransport`` (optionally split into chunks, cut
off, or paused), and hands the SDK client to the adapter. Nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import anthropic
import openai

try:  # the SDKs send through httpx2 (older releases: httpx)
    import httpx2 as http
except ImportError:  # pragma: no cover
    import httpx as http  # type: ignore[no-redef]

__all__ = [
    "Server",
    "anthropic_client",
    "anthropic_response",
    "anthropic_sse",
    "collect",
    "http",
    "openai_chunk",
    "openai_client",
    "openai_sse",
]


# ---------------------------------------------------------------- building SSE bodies


def anthropic_sse(events: Iterable[dict[str, Any]]) -> bytes:
    """An Anthropic Messages stream body: ``event: <type>`` / ``data: <json>`` per event."""
    out = []
    for event in events:
        out.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return "".join(out).encode()


def anthropic_response(
    blocks: Sequence[tuple[str, Any]],
    *,
    model: str = "claude-sonnet-4-5-20250929",
    stop_reason: str | None = None,
    usage: dict[str, int] | None = None,
    output_tokens: int = 17,
    chunk: int = 5,
    ping: bool = True,
) -> list[dict[str, Any]]:
    """The events of one Anthropic response, as the API streams it.

    ``blocks`` items: ``("text", str)``, ``("thinking", (text, signature))`` or
    ``("tool_use", (id, name, arguments_json))``; text and arguments arrive in ``chunk``-sized
    deltas, so arguments are JSON fragments.
    """
    start_usage = {"input_tokens": 25, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    start_usage.update(usage or {})
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_01", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": start_usage,
            },
        }
    ]
    if ping:
        events.append({"type": "ping"})
    has_tools = False
    for index, (kind, value) in enumerate(blocks):
        if kind == "text":
            events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            for piece in _pieces(value, chunk):
                events.append({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})
        elif kind == "thinking":
            text, signature = value
            events.append({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
            for piece in _pieces(text, chunk):
                events.append({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": piece}})
            events.append({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": signature}})
        elif kind == "tool_use":
            has_tools = True
            call_id, name, arguments = value
            events.append({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}})
            for piece in [""] + _pieces(arguments, chunk):
                events.append({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})
        else:
            raise ValueError(kind)
        events.append({"type": "content_block_stop", "index": index})
    events.append({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason or ("tool_use" if has_tools else "end_turn"), "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    })
    events.append({"type": "message_stop"})
    return events


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "gpt-4.1-2025-04-14",
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; with ``delta`` None it is the trailing usage-only chunk."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
    return {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
        "system_fingerprint": "fp_1", "choices": choices, "usage": usage,
    }


def openai_sse(chunks: Iterable[dict[str, Any]], *, done: bool = True) -> bytes:
    """A Chat Completions stream body: ``data: <json>`` per chunk, then ``data: [DONE]``."""
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    if done:
        body += "data: [DONE]\n\n"
    return body.encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# ---------------------------------------------------------------- serving them


class Server:
    """A mock HTTP server for one SDK client: answers each request with the next queued reply.

    A reply is a body (bytes, sent as ``text/event-stream``), optionally split at ``cuts``
    (byte offsets), ended early (``cut_after``: raise a read error after that many bytes), or
    held open after ``pause_after`` bytes until ``release`` is set. Every request is recorded
    (``requests``, ``bodies``).
    """

    def __init__(self) -> None:
        self.replies: list[Callable[[Any], Any]] = []
        self.requests: list[Any] = []
        self.responses: list[Any] = []
        self.release = asyncio.Event()

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the requests received so far."""
        return [json.loads(r.content) for r in self.requests]

    def stream(
        self,
        body: bytes,
        *,
        cuts: Sequence[int] = (),
        cut_after: int | None = None,
        pause_after: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> Server:
        """Queues a 200 streaming reply of ``body``."""

        def reply(request: Any) -> Any:
            return http.Response(
                200,
                headers={"content-type": "text/event-stream", **(headers or {})},
                stream=_Body(body, cuts, cut_after, pause_after, self.release),
                request=request,
            )

        self.replies.append(reply)
        return self

    def error(self, status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None) -> Server:
        """Queues an HTTP error reply with a JSON (or text) body."""

        def reply(request: Any) -> Any:
            content = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
            kind = "application/json" if isinstance(body, dict) else "text/plain"
            return http.Response(status, headers={"content-type": kind, **(headers or {})}, content=content, request=request)

        self.replies.append(reply)
        return self

    def drop(self) -> Server:
        """Queues a connection that fails before any response."""

        def reply(request: Any) -> Any:
            raise http.ConnectError("connection refused", request=request)

        self.replies.append(reply)
        return self

    async def handle(self, request: Any) -> Any:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected request {len(self.requests)}: no reply queued")
        response = self.replies.pop(0)(request)
        self.responses.append(response)
        return response

    def http_client(self) -> Any:
        """An ``httpx2.AsyncClient`` answered by this server."""
        return http.AsyncClient(transport=http.MockTransport(self.handle))


class _Body(http.AsyncByteStream):
    def __init__(self, body: bytes, cuts: Sequence[int], cut_after: int | None, pause_after: int | None, release: asyncio.Event) -> None:
        self.body, self.cut_after, self.pause_after, self.release = body, cut_after, pause_after, release
        self.cuts = sorted(c for c in set(cuts) if 0 < c < len(body))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        end = len(self.body) if self.cut_after is None else self.cut_after
        bounds = [c for c in self.cuts if c < end]
        if self.pause_after is not None and self.pause_after < end:
            bounds = sorted(set(bounds) | {self.pause_after})
        start = 0
        for bound in [*bounds, end]:
            if bound > start:
                yield self.body[start:bound]
            start = bound
            if bound == self.pause_after:
                await self.release.wait()
        if self.cut_after is not None:
            raise http.RemoteProtocolError("peer closed connection without sending complete message body")


def anthropic_client(server: Server) -> anthropic.AsyncAnthropic:
    """An ``AsyncAnthropic`` whose requests ``server`` answers."""
    return anthropic.AsyncAnthropic(api_key="sk-ant-test", max_retries=0, http_client=server.http_client())


def openai_client(server: Server, base_url: str | None = None) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` whose requests ``server`` answers."""
    return openai.AsyncOpenAI(api_key="sk-test", base_url=base_url, max_retries=0, http_client=server.http_client())


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    """All events of a stream, as a list."""
    return [event async for event in stream]
