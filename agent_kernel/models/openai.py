"""models.openai — OpenAI's Responses API and Chat Completions (and servers that speak it) as a ``Model``.

``api=`` picks the wire: ``"responses"`` (``models.openai_responses``, the default for OpenAI's
own endpoint) or ``"chat"`` (the default whenever a base URL points at any other server, since
compatible servers speak Chat Completions). This module builds the client, chooses, and owns the
Chat Completions wire.

Chat Completions: one streamed ``chat.completions.create`` per request. Text deltas pass
straight through; ``reasoning_content`` (or ``reasoning``) deltas that compatible servers such as
vLLM, DeepSeek or Ollama send become thinking deltas; tool-call fragments are assembled by their
``index`` and each call ends when the choice finishes. Usage is asked for with
``stream_options={"include_usage": True}``; a server that sends none (llama.cpp's ignores the
option) yields no usage, so the call's cost is unknown rather than zero, and a server that rejects
the option is asked again without it (once per model object).

Compatible servers (Ollama, vLLM, llama.cpp server, LM Studio) are one ``base_url`` away, e.g.
``OpenAIModel("llama3.1", base_url="http://localhost:11434/v1")``; with a base URL no key is
required. The SDK's own retries are off by default because the loop retries visibly.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import openai

from agent_kernel.errors import ModelError, UserError
from agent_kernel.messages import Message, SummaryBlock, TextBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models._base import MessageEnd, ModelRequest, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolSpec, Usage
from agent_kernel.models._catalog import DEFAULT_MODELS, context_window
from agent_kernel.models._keys import require_key
from agent_kernel.models._openai_responses import arguments_json, responses_events, responses_params
from agent_kernel.models._options import check_options, fit_to_signature, provider_extras, tool_choice
from agent_kernel.models._sdk_errors import map_openai_error, stream_cut
from agent_kernel.models._transport import LoopBound, watch_stream_activity

__all__ = ["OpenAIModel", "to_openai_messages", "to_openai_tools"]

# Chat Completions finish reasons in the vocabulary MessageEnd uses for every provider.
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


_APIS = ("responses", "chat")


class OpenAIModel:
    """An OpenAI (or OpenAI-compatible) model, streamed through ``openai.AsyncOpenAI``.

    Args:
        name: the model id, e.g. ``gpt-4.1``, or whatever a compatible server calls its model.
        api_key: the key; defaults to ``OPENAI_API_KEY``. Not required when a base URL is set.
        base_url: a compatible server; defaults to ``OPENAI_BASE_URL`` or OpenAI's.
        client: a ready ``AsyncOpenAI`` to use instead of building one.
        max_tokens: most tokens per response (none by default: the server's own limit).
        stream_usage: ask for usage in the stream (``stream_options.include_usage``).
        context_window: tokens per request; defaults to the catalog's figure for ``name``.
        max_retries: the SDK's own retries; 0 because the loop retries visibly.
        api: ``"responses"`` (the Responses API), ``"chat"`` (Chat Completions), or None: the
            Responses API on api.openai.com, Chat Completions on any other base URL.
        images: send tool results' images (a plot) as images; None: on OpenAI's own API, while a
            compatible server (which may take none) gets a text line naming each.
        client_options: more ``AsyncOpenAI`` arguments (``organization``, ``timeout``,
            ``default_headers``, ``http_client``, ...).

    Raises:
        MissingAPIKey: no key is given or set, and no base URL points elsewhere.
        UserError: ``api`` is not one of the choices.

    Example:
        >>> local = OpenAIModel("qwen2.5:7b", base_url="http://localhost:11434/v1")  # doctest: +SKIP
    """

    provider = "openai"

    def __init__(
        self,
        name: str = DEFAULT_MODELS["openai"],
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_tokens: int | None = None,
        stream_usage: bool = True,
        context_window: int | None = None,
        max_retries: int = 0,
        api: Literal["responses", "chat"] | None = None,
        images: bool | None = None,
        **client_options: Any,
    ) -> None:
        if api is not None and api not in _APIS:
            raise UserError(
                f"OpenAIModel api must be 'responses' (the Responses API) or 'chat' (Chat Completions), got {api!r}. "
                "Leave it unset to use the Responses API on api.openai.com and Chat Completions on any other base_url."
            )
        self.name = name
        # Images go to OpenAI itself; a compatible server (llama.cpp, a gateway) may take none, so
        # it gets their text lines unless images=True says it takes them.
        self.images = images if images is not None else (base_url is None or "api.openai.com" in base_url)
        self.context_window = context_window or _window(name)
        self.max_tokens = max_tokens
        self.stream_usage = stream_usage
        if client is None:
            key = require_key("OpenAI", "OPENAI_API_KEY", api_key, base_url, "OPENAI_BASE_URL")

            def make() -> openai.AsyncOpenAI:
                # A compatible server without auth still needs some key for the SDK to build a client.
                return openai.AsyncOpenAI(api_key=key or "not-needed", base_url=base_url, max_retries=max_retries, **client_options)

            self._clients = LoopBound(make)
        else:
            self._clients = LoopBound(given=client)
        #: The wire this model speaks: ``"responses"`` or ``"chat"``.
        self.api: str = api or _default_api(str(client.base_url) if client is not None else base_url or os.environ.get("OPENAI_BASE_URL"))

    def close(self) -> None:
        """Closes the pooled connections of the SDK clients this model made (a ``client`` you
        passed stays open: it is yours). The next request opens new ones."""
        self._clients.close()

    async def aclose(self) -> None:
        """``close``, returning once the running loop's client has closed its connections."""
        await self._clients.aclose()

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client of the running event loop (one per loop: see ``models.transport``)."""
        client = self._clients.get()
        watch_stream_activity(getattr(client, "_client", None))  # the SDK's httpx client
        return client

    def __repr__(self) -> str:
        return f"OpenAIModel({self.name!r}, api={self.api!r})"

    @property
    def _is_openai(self) -> bool:
        return "api.openai.com" in str(self.client.base_url)

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of the ``responses.create`` or ``chat.completions.create`` call (without ``stream``)."""
        if self.api == "responses":
            return responses_params(self.name, request, max_tokens=self.max_tokens)
        check_options(request.options)
        options = request.options
        params: dict[str, Any] = {
            "model": self.name,
            "messages": to_openai_messages(request.messages, system=request.system, images=self.images),
        }
        if request.tools:
            params["tools"] = to_openai_tools(request.tools)
            choice = tool_choice(options)
            if choice is not None:
                params["tool_choice"] = choice if isinstance(choice, str) else {"type": "function", "function": dict(choice)}
        if self.stream_usage:
            params["stream_options"] = {"include_usage": True}
        max_tokens = options.get("max_tokens", self.max_tokens)
        if max_tokens is not None:
            # OpenAI's newer models accept only max_completion_tokens; compatible servers
            # mostly know only max_tokens.
            params["max_completion_tokens" if self._is_openai else "max_tokens"] = int(max_tokens)
        for key in ("temperature", "top_p", "reasoning_effort"):
            if key in options:
                params[key] = options[key]
        if "stop" in options:
            params["stop"] = list(options["stop"])
        params.update(provider_extras(options, "openai"))
        return params

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Streams the response to ``request``; raises ``ModelError`` on any failure."""
        if self.api == "responses":
            return self._stream_responses(self.request_params(request))
        return self._stream(self.request_params(request))

    async def _stream_responses(self, params: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        try:
            client = self.client
            sdk_stream = await client.responses.create(**fit_to_signature(client.responses.create, params), stream=True)
        except Exception as exc:
            raise map_openai_error(exc) from exc
        async for event in responses_events(sdk_stream, self.name):
            yield event

    async def _open(self, params: dict[str, Any]) -> Any:
        try:
            client = self.client
            return await client.chat.completions.create(**fit_to_signature(client.chat.completions.create, params), stream=True)
        except openai.BadRequestError as exc:
            if "stream_options" in params and "stream_options" in str(exc):
                # An older compatible server that does not know the option: stop asking for it.
                self.stream_usage = False
                params = {k: v for k, v in params.items() if k != "stream_options"}
                return await self._open(params)
            raise map_openai_error(exc) from exc
        except Exception as exc:
            raise map_openai_error(exc) from exc

    async def _stream(self, params: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        sdk_stream = await self._open(params)
        started = False
        finish: str | None = None
        model = self.name
        usage: Usage | None = None  # stays None when the server sends no usage chunk
        calls = _ToolCalls()
        try:
            async for chunk in sdk_stream:
                started = True
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                if chunk.model:
                    model = chunk.model
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                if delta is not None:
                    if delta.content:
                        yield TextDelta(delta.content)
                    extra = delta.model_extra
                    if extra:
                        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
                        if isinstance(reasoning, str) and reasoning:
                            yield ThinkingDelta(reasoning)
                    if delta.tool_calls:
                        for event in calls.feed(delta.tool_calls):
                            yield event
                if choice.finish_reason:
                    finish = choice.finish_reason
                    for event in calls.end():
                        yield event
        except ModelError:
            raise
        except Exception as exc:
            error = map_openai_error(exc, started=started)
            if finish is None or error.kind not in ("stream_cut", "timeout"):
                raise error from exc
            # The answer was complete (a finish_reason came); only the trailing usage was lost.
        finally:
            await sdk_stream.close()
        if finish is None:
            raise stream_cut("OpenAI", "the stream ended before a finish_reason")
        yield MessageEnd(_STOP_REASONS.get(finish, finish), usage, model)


def _window(name: str) -> int:
    return context_window("openai", name)


def _default_api(base_url: str | None) -> str:
    """The Responses API for OpenAI's own endpoint; Chat Completions, which compatible servers speak, elsewhere."""
    if not base_url:
        return "responses"
    host = urlsplit(base_url if "//" in base_url else f"//{base_url}").hostname or ""
    return "responses" if host == "api.openai.com" else "chat"


def _usage(usage: Any) -> Usage:
    prompt = usage.prompt_tokens or 0
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    # Usage counts cache reads apart from input; OpenAI's prompt_tokens includes them.
    return Usage(input_tokens=prompt - cached, output_tokens=usage.completion_tokens or 0, cache_read_tokens=cached)


class _ToolCalls:
    """Assembles tool-call fragments into calls, by the index the server gives each fragment.

    Servers differ: some send the name in the first fragment and the arguments in the rest, some
    send the arguments whole, a few number every call 0 (a new id is then a new call) or leave
    the index out. A call is announced once its name is known; every call ends when the choice
    finishes, since Chat Completions has no per-call end marker.
    """

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []  # [index, id, name, argument fragments]
        self.by_server: dict[int, int] = {}

    def feed(self, fragments: Sequence[Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for fragment in fragments:
            server = fragment.index
            if server is None:
                server = len(self.calls) if (fragment.id or not self.calls) else self.calls[-1][0]
            pos = self.by_server.get(server)
            if pos is not None and fragment.id and self.calls[pos][1] and fragment.id != self.calls[pos][1]:
                pos = None
            if pos is None:
                pos = len(self.calls)
                self.calls.append([pos, fragment.id, None, []])
                self.by_server[server] = pos
            call = self.calls[pos]
            if fragment.id and not call[1]:
                call[1] = fragment.id
            function = fragment.function
            if function is None:
                continue
            if function.name and call[2] is None:
                call[2] = function.name
                call[1] = call[1] or f"call_{pos}"
                events.append(ToolCallStart(pos, call[1], function.name))
                # Fragments that came before the name are announced now, in order.
                events.extend(ToolCallDelta(pos, piece) for piece in call[3])
            if function.arguments:
                call[3].append(function.arguments)
                if call[2] is not None:
                    events.append(ToolCallDelta(pos, function.arguments))
        return events

    def end(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for index, call_id, name, pieces in self.calls:
            if name is None:
                # A call that never got a name is announced now, nameless: the loop answers it
                # with an error the model can read, instead of dropping it silently.
                call_id = call_id or f"call_{index}"
                events.append(ToolCallStart(index, call_id, ""))
            events.append(ToolCallEnd(index, call_id, name or "", "".join(pieces) or "{}"))
        self.calls.clear()
        self.by_server.clear()
        return events


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool definitions in the Chat Completions shape."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def to_openai_messages(messages: Sequence[Message], *, system: str | None = None, images: bool = True) -> list[dict[str, Any]]:
    """Messages in the Chat Completions shape.

    The system prompt comes first; a user message's tool results become ``tool`` messages
    (placed before its text, right after the assistant's calls, as the API requires); summaries
    are sent as text; thinking is not sent back (Chat Completions has no field for it). Images
    of tool results follow the tool messages in a user message (a tool message takes text only);
    with ``images=False`` (a server that takes none) each is a line of text in its result.
    """
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in messages:
        text = "".join(b.text for b in message.content if isinstance(b, (TextBlock, SummaryBlock)))
        if message.role == "assistant":
            calls = [
                {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": arguments_json(b.input)}}
                for b in message.content
                if isinstance(b, ToolUseBlock)
            ]
            if not text and not calls:
                continue
            # No text: an empty string, not null or absent. OpenAI takes all three beside
            # tool_calls; llama.cpp's server rejects null ("Input should be a valid string") and
            # its chat templates fail on a message with no content.
            item: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                item["tool_calls"] = calls
            wire.append(item)
        else:
            pictures: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    content = block.content if not block.is_error else f"Error: {block.content}"
                    if block.images and not images:
                        content += "".join(f"\n{i.placeholder}" for i in block.images)
                    elif block.images:
                        pictures += image_parts(block)
                    wire.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
            if pictures:
                # A tool message holds text only: the images follow the tool messages as a user message.
                wire.append({"role": "user", "content": pictures})
            if text:
                wire.append({"role": "user", "content": text})
    return wire


def image_parts(block: ToolResultBlock) -> list[dict[str, Any]]:
    """A tool result's images as Chat Completions user content parts, each named for its call."""
    parts: list[dict[str, Any]] = []
    for image in block.images:
        parts.append({"type": "text", "text": f"Image from the {block.tool_use_id} result{': ' + image.alt if image.alt else ''}"})
        parts.append({"type": "image_url", "image_url": {"url": f"data:{image.media_type};base64,{image.data}"}})
    return parts

