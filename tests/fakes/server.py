"""A loopback HTTP server that answers the real SDKs as Anthropic and OpenAI do, strictly.

It serves ``POST /v1/messages`` (Anthropic Messages), ``POST /v1/chat/completions`` (OpenAI
Chat Completions) and ``POST /v1/responses`` (OpenAI Responses) over HTTP/1.1 with keep-alive,
so the SDK clients pool connections exactly as they do against the real APIs (and a client kept
past its event loop fails here as it does there). Every request body is checked as strictly as
the real API checks it; a request the API would refuse gets the API's 400, and the reason is
kept in ``rejected`` so a test can insist there was none.

Replies are scripted per request, in order (``script``): a neutral ``turn`` (see ``turns``),
``Fail`` (an error status, with headers such as ``retry-after``), ``Cut`` (the connection drops
after some events), ``Pings`` (keep-alive traffic before the turn) or ``Hang`` (some events, then
silence until ``release`` or the client hangs up).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

from .anthropic_api import anthropic_error, anthropic_events, check_anthropic_request
from .chat_api import chat_chunks, chat_error, check_chat_request
from .errors import StrictAPIError
from .turns import Turn


@dataclass(frozen=True)
class Fail:
    """An error response: ``status``, the API's error body with ``message``, extra ``headers``."""

    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Cut:
    """The turn streams until ``after_calls`` tool calls are complete, then the connection drops.

    ``after_calls=0`` cuts in the middle of the first call's arguments. Chat Completions ends
    every call only with the choice's finish, so there "complete" means the finish arrived.
    """

    turn: Turn
    after_calls: int


@dataclass(frozen=True)
class Pings:
    """``count`` keep-alive pings ``every`` seconds apart, then the turn."""

    turn: Turn
    count: int
    every: float


@dataclass(frozen=True)
class Hang:
    """The turn's first ``keep`` events, then nothing until ``release`` (or the client leaves)."""

    turn: Turn
    keep: int = 0


Reply = Union[Turn, Fail, Cut, Pings, Hang]


@dataclass
class Wire:
    """How one API puts events on the wire."""

    check: Callable[[dict[str, Any]], None]
    events: Callable[[Turn, str, dict[str, Any]], list[bytes]]
    error: Callable[[int, str], dict[str, Any]]
    ping: bytes


def _anthropic_events(t: Turn, model: str, body: dict[str, Any]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in anthropic_events(t, model)]


def _chat_events(t: Turn, model: str, body: dict[str, Any]) -> list[bytes]:
    usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chat_chunks(t, model, include_usage=usage)] + [b"data: [DONE]\n\n"]


def _responses_wire() -> Wire | None:
    try:
        from .responses_api import check_responses_request, responses_sse
    except ImportError:
        return None

    def events(t: Turn, model: str, body: dict[str, Any]) -> list[bytes]:
        encrypted = "reasoning.encrypted_content" in (body.get("include") or [])
        return [frame + b"\n\n" for frame in responses_sse(t, model, encrypted=encrypted).split(b"\n\n") if frame.strip()]

    def error(status: int, message: str) -> dict[str, Any]:
        return chat_error(status, message)

    return Wire(check_responses_request, events, error, b": keep-alive\n\n")


WIRES: dict[str, Wire] = {
    "/v1/messages": Wire(check_anthropic_request, _anthropic_events, anthropic_error, b'event: ping\ndata: {"type": "ping"}\n\n'),
    "/v1/chat/completions": Wire(check_chat_request, _chat_events, chat_error, b": keep-alive\n\n"),
}
_responses = _responses_wire()
if _responses is not None:
    WIRES["/v1/responses"] = _responses


class FakeProvider:
    """The server; ``url`` is its base (``http://127.0.0.1:PORT``). Use as a context manager."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.rejected: list[str] = []
        self.release = threading.Event()
        #: The model the responses say answered; None: the one requested (a real API may report a
        #: dated version of an alias, or a gateway the model behind a deployment name).
        self.served: str | None = None
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                provider._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-provider", daemon=True)
        self._thread.start()

    def __enter__(self) -> FakeProvider:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Releases hung replies and stops serving."""
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def script(self, *replies: Reply) -> FakeProvider:
        """Queues replies, one per request, in order."""
        with self._lock:
            self.replies.extend(replies)
        return self

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The request bodies received, in order."""
        return [body for _, body in self.requests]

    def claude(self) -> Any:
        """An ``AnthropicModel`` on the real SDK, pointed at this server."""
        from agent_kernel.models.anthropic import AnthropicModel

        return AnthropicModel("claude-sonnet-4-6", base_url=self.url, api_key="sk-ant-test")

    # -- serving ---------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        raw = h.rfile.read(int(h.headers.get("content-length") or 0))
        wire = WIRES.get(path)
        if wire is None:
            self._json(h, 404, {"error": {"message": f"Unknown path {path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw)
        except ValueError as exc:
            self.rejected.append(f"{path}: body is not JSON ({exc})")
            self._json(h, 400, wire.error(400, f"We could not parse the JSON body of your request: {exc}"))
            return
        with self._lock:
            self.requests.append((path, body))
            reply = self.replies.pop(0) if self.replies else None
        try:
            wire.check(body)
            if not body.get("stream"):
                raise StrictAPIError(400, "the fake serves streamed requests only (stream: true)")
        except StrictAPIError as exc:
            self.rejected.append(f"{path}: {exc.message}")
            self._json(h, exc.status, wire.error(exc.status, exc.message))
            return
        if reply is None:
            self.rejected.append(f"{path}: request {len(self.requests)} has no scripted reply")
            self._json(h, 500, wire.error(500, "no reply scripted for this request"))
            return
        if isinstance(reply, Fail):
            self._json(h, reply.status, wire.error(reply.status, reply.message), reply.headers)
            return
        model = self.served or str(body.get("model", "fake"))
        turn = reply if isinstance(reply, dict) else reply.turn
        events = wire.events(turn, model, body)
        try:
            self._start_stream(h)
            if isinstance(reply, Pings):
                for _ in range(reply.count):
                    self._chunk(h, wire.ping)
                    if self.release.wait(reply.every):
                        break
            if isinstance(reply, Cut):
                for event in events[: _cut_point(events, reply.after_calls)]:
                    self._chunk(h, event)
                h.wfile.flush()
                h.connection.shutdown(socket.SHUT_RDWR)  # mid-body: no closing chunk
                h.close_connection = True
                return
            if isinstance(reply, Hang):
                for event in events[: reply.keep]:
                    self._chunk(h, event)
                while not self.release.wait(0.05):
                    if _peer_gone(h.connection):
                        h.close_connection = True
                        return
                h.close_connection = True
                return
            for event in events:
                self._chunk(h, event)
            self._chunk(h, b"")  # the closing chunk: the connection stays open for the next request
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _start_stream(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("transfer-encoding", "chunked")
        h.send_header("cache-control", "no-cache")
        h.end_headers()

    @staticmethod
    def _chunk(h: BaseHTTPRequestHandler, data: bytes) -> None:
        h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        h.wfile.flush()


def _cut_point(frames: list[bytes], after_calls: int) -> int:
    """How many frames to send so that ``after_calls`` tool calls are complete (0: mid-call)."""
    completed, in_call = 0, False
    for i, frame in enumerate(frames):
        starts = (b"content_block_start" in frame and b'"tool_use"' in frame) or (b'"tool_calls"' in frame and b'"id"' in frame) or (
            b"response.output_item.added" in frame and b"function_call" in frame)
        if starts:
            if after_calls == 0:
                return i + 2  # the call's head and one fragment of its arguments
            in_call = True
        if in_call and b"content_block_stop" in frame or (b"response.output_item.done" in frame and b"function_call" in frame):
            completed += 1
            in_call = False
        elif b'"finish_reason": "tool_calls"' in frame:
            completed = after_calls
        if after_calls and completed >= after_calls:
            return i + 1
    return len(frames)


def _peer_gone(conn: socket.socket) -> bool:
    """True once the client has closed its end (a read would return nothing)."""
    try:
        conn.setblocking(False)
        try:
            return conn.recv(1, socket.MSG_PEEK) == b""
        finally:
            conn.setblocking(True)
    except BlockingIOError:
        return False
    except OSError:
        return True
