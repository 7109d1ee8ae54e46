"""models.anthropic — the Anthropic Messages API as a streaming ``Model``, over the official SDK.

The adapter sends one streamed ``messages.create`` per request and turns the SDK's raw stream
events into model stream events: text and thinking deltas (signatures included, so the loop can
send thinking back), tool calls assembled from ``input_json_delta`` fragments and ended at each
``content_block_stop`` (so the executor can start a tool while the model is still writing), then
one ``MessageEnd`` with the stop reason and usage, cache reads and writes included.

Prompt caching puts ``cache_control`` breakpoints on the system prompt, the last tool definition
and the last user message, so each call of a loop reads the previous call's prefix from the cache.

The SDK's own retries are off (``max_retries=0``) unless asked for: the loop retries with backoff
and announces each attempt as a ``retry`` event, and SDK retries would be invisible and would
multiply with the loop's. Every failure leaves as a ``ModelError`` (see ``sdk_errors``).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Literal

import anthropic

from agent_kernel.errors import ModelError, UserError
from agent_kernel.messages import Message, SummaryBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models._base import MessageEnd, ModelRequest, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolSpec, Usage
from agent_kernel.models._catalog import DEFAULT_MODELS, context_window
from agent_kernel.models._keys import require_key
from agent_kernel.models._options import check_options, fit_to_signature, provider_extras, tool_choice
from agent_kernel.models._sdk_errors import map_anthropic_error, stream_cut
from agent_kernel.models._transport import LoopBound, watch_stream_activity

__all__ = ["AnthropicModel", "to_anthropic_messages", "to_anthropic_tools"]

_EPHEMERAL = {"type": "ephemeral"}
#: Where a cache breakpoint may go (``AnthropicModel(prompt_caching=...)``).
CACHE_PLACES = ("system", "tools", "messages")


def _cache_places(setting: bool | Iterable[str]) -> frozenset[str]:
    if setting is True:
        return frozenset(CACHE_PLACES)
    if setting is False or setting is None:
        return frozenset()
    if isinstance(setting, str):
        setting = (setting,)
    places = frozenset(setting)
    unknown = sorted(places - set(CACHE_PLACES))
    if unknown:
        raise UserError(f"prompt_caching takes True, False or some of {', '.join(map(repr, CACHE_PLACES))}; got {', '.join(map(repr, unknown))}.")
    return places

# The neutral tool_choice modes in the Messages API's shape ("required" is "any" there).
_ANTHROPIC_TOOL_CHOICE = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}


class AnthropicModel:
    """An Anthropic model, streamed through ``anthropic.AsyncAnthropic``.

    Args:
        name: the model id, e.g. ``claude-sonnet-4-6``.
        api_key: the key; defaults to ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``).
        base_url: another endpoint; defaults to ``ANTHROPIC_BASE_URL`` or Anthropic's.
        client: a ready ``AsyncAnthropic`` to use instead of building one (then ``api_key``,
            ``base_url`` and ``client_options`` are not used).
        max_tokens: most tokens per response, unless a request's options say otherwise.
        thinking_budget: enables extended thinking with this many tokens (or ``"adaptive"``:
            the model decides), unless a request's options say otherwise.
        prompt_caching: put cache breakpoints on the system prompt, the tools and the
            conversation (True), on none (False), or only on some of them: a collection of
            ``"system"``, ``"tools"``, ``"messages"`` (e.g. ``{"system", "tools"}`` for a
            conversation that changes too much to be worth caching).
        context_window: tokens per request; defaults to the catalog's figure for ``name``.
        max_retries: the SDK's own retries; 0 because the loop retries visibly.
        client_options: more ``AsyncAnthropic`` arguments (``timeout``, ``default_headers``,
            ``http_client``, ...).

    Raises:
        MissingAPIKey: no key is given or set, and no base URL points elsewhere.

    Example:
        >>> model = AnthropicModel("claude-sonnet-4-6", thinking_budget=2048)  # doctest: +SKIP
    """

    provider = "anthropic"

    def __init__(
        self,
        name: str = DEFAULT_MODELS["anthropic"],
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        max_tokens: int = 8192,
        thinking_budget: int | Literal["adaptive"] | None = None,
        prompt_caching: bool | Iterable[str] = True,
        context_window: int | None = None,
        max_retries: int = 0,
        **client_options: Any,
    ) -> None:
        self.name = name
        self.context_window = context_window or _window(name)
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        #: Where cache breakpoints go (a subset of ``CACHE_PLACES``).
        self.cache_places = _cache_places(prompt_caching)
        self.prompt_caching = bool(self.cache_places)
        if client is None:
            has_token = client_options.get("auth_token") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
            if not has_token:
                api_key = require_key("Anthropic", "ANTHROPIC_API_KEY", api_key, base_url, "ANTHROPIC_BASE_URL")
            key = api_key

            def make() -> anthropic.AsyncAnthropic:
                return anthropic.AsyncAnthropic(api_key=key, base_url=base_url, max_retries=max_retries, **client_options)

            self._clients = LoopBound(make)
        else:
            self._clients = LoopBound(given=client)

    def close(self) -> None:
        """Closes the pooled connections of the SDK clients this model made (a ``client`` you
        passed stays open: it is yours). The next request opens new ones."""
        self._clients.close()

    async def aclose(self) -> None:
        """``close``, returning once the running loop's client has closed its connections."""
        await self._clients.aclose()

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The SDK client of the running event loop (one per loop: see ``models.transport``)."""
        client = self._clients.get()
        watch_stream_activity(getattr(client, "_client", None))  # the SDK's httpx client
        return client

    def __repr__(self) -> str:
        return f"AnthropicModel({self.name!r})"

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of the ``messages.create`` call for ``request`` (without ``stream``)."""
        check_options(request.options)
        options = request.options
        max_tokens = int(options.get("max_tokens", self.max_tokens))
        params: dict[str, Any] = {
            "model": self.name,
            "messages": to_anthropic_messages(request.messages, cache="messages" in self.cache_places),
        }
        if request.system:
            system: dict[str, Any] = {"type": "text", "text": request.system}
            if "system" in self.cache_places:
                system["cache_control"] = _EPHEMERAL
            params["system"] = [system]
        if request.tools:
            params["tools"] = to_anthropic_tools(request.tools, cache="tools" in self.cache_places)
            choice = tool_choice(options)
            if choice is not None:
                params["tool_choice"] = _ANTHROPIC_TOOL_CHOICE[choice] if isinstance(choice, str) else {"type": "tool", **choice}
        budget = options.get("thinking_budget", self.thinking_budget)
        if budget == "adaptive":
            # Newer models decide their own budget (and the SDK warns about fixed ones on them).
            params["thinking"] = {"type": "adaptive"}
        elif budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": int(budget)}
            # The API requires max_tokens > budget_tokens; room for the answer comes on top.
            if max_tokens <= budget:
                max_tokens = int(budget) + self.max_tokens
        params["max_tokens"] = max_tokens
        for key in ("temperature", "top_p"):
            if key in options:
                params[key] = options[key]
        if "stop" in options:
            params["stop_sequences"] = list(options["stop"])
        params.update(provider_extras(options, "anthropic"))
        return params

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Streams the response to ``request``; raises ``ModelError`` on any failure."""
        return self._stream(self.request_params(request))

    async def _stream(self, params: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        try:
            client = self.client
            sdk_stream = await client.messages.create(**fit_to_signature(client.messages.create, params), stream=True)
        except Exception as exc:
            raise map_anthropic_error(exc) from exc

        started = False
        finished = False
        # content block index -> [tool index, id, name, argument fragments, initial input]
        calls: dict[int, list[Any]] = {}
        n_tools = 0
        model = self.name
        stop_reason = "end_turn"
        input_tokens = output_tokens = cache_read = cache_write = 0
        try:
            async for event in sdk_stream:
                started = True
                kind = event.type
                if kind == "content_block_delta":
                    delta = event.delta
                    dtype = delta.type
                    if dtype == "text_delta":
                        yield TextDelta(delta.text)
                    elif dtype == "input_json_delta":
                        if delta.partial_json:  # the API opens each tool block with an empty one
                            call = calls[event.index]
                            call[3].append(delta.partial_json)
                            yield ToolCallDelta(call[0], delta.partial_json)
                    elif dtype == "thinking_delta":
                        yield ThinkingDelta(delta.thinking)
                    elif dtype == "signature_delta":
                        yield ThinkingDelta("", delta.signature)
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        calls[event.index] = [n_tools, block.id, block.name, [], block.input]
                        yield ToolCallStart(n_tools, block.id, block.name)
                        n_tools += 1
                    elif block.type == "text" and block.text:
                        yield TextDelta(block.text)
                    elif block.type == "thinking" and block.thinking:
                        yield ThinkingDelta(block.thinking)
                elif kind == "content_block_stop":
                    done = calls.pop(event.index) if event.index in calls else None
                    if done is not None:
                        yield ToolCallEnd(done[0], done[1], done[2], _arguments(done[3], done[4]))
                elif kind == "message_start":
                    message = event.message
                    model = message.model or model
                    usage = message.usage
                    input_tokens = usage.input_tokens or 0
                    output_tokens = usage.output_tokens or 0
                    cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
                    cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
                elif kind == "message_delta":
                    stop_reason = event.delta.stop_reason or stop_reason
                    usage = event.usage
                    # message_delta usage is cumulative; fields it leaves out keep message_start's.
                    output_tokens = _given(usage.output_tokens, output_tokens)
                    input_tokens = _given(getattr(usage, "input_tokens", None), input_tokens)
                    cache_read = _given(getattr(usage, "cache_read_input_tokens", None), cache_read)
                    cache_write = _given(getattr(usage, "cache_creation_input_tokens", None), cache_write)
                elif kind == "message_stop":
                    finished = True
                    yield MessageEnd(stop_reason, Usage(input_tokens, output_tokens, cache_read, cache_write), model)
        except ModelError:
            raise
        except Exception as exc:
            raise map_anthropic_error(exc, started=started) from exc
        finally:
            await sdk_stream.close()
        if not finished:
            raise stream_cut("Anthropic", "the stream ended before message_stop")


def _given(value: int | None, before: int) -> int:
    return before if value is None else value


def _window(name: str) -> int:
    return context_window("anthropic", name)


def _arguments(fragments: list[str], initial: Any) -> str:
    raw = "".join(fragments)
    if raw:
        return raw
    # No fragments: a tool without arguments, or a server that sent the input whole at the start.
    return json.dumps(initial) if initial else "{}"


def to_anthropic_tools(tools: Sequence[ToolSpec], *, cache: bool = False) -> list[dict[str, Any]]:
    """Tool definitions in the Messages API shape; with ``cache``, a breakpoint on the last one."""
    wire: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]
    if cache and wire:
        wire[-1]["cache_control"] = _EPHEMERAL
    return wire


def to_anthropic_messages(messages: Sequence[Message], *, cache: bool = False) -> list[dict[str, Any]]:
    """Messages in the Messages API shape.

    Tool results lead their user message (the API requires it), summaries are sent as text,
    thinking without a signature is left out (the API would reject it), and empty text blocks
    and messages are skipped. With ``cache``, the last user message gets a cache breakpoint so
    the next call reads the whole conversation so far from the cache.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        results: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, (TextBlock, SummaryBlock)):
                if block.text:
                    blocks.append({"type": "text", "text": block.text})
            elif isinstance(block, ToolUseBlock):
                blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
            elif isinstance(block, ToolResultBlock):
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": block.tool_use_id,
                    "content": block.content or "(no output)",
                }
                if block.images:  # a tool result holds text and image blocks together
                    result["content"] = [{"type": "text", "text": result["content"]}] + [
                        {"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.data}} for i in block.images
                    ]
                if block.is_error:
                    result["is_error"] = True
                results.append(result)
            elif isinstance(block, ThinkingBlock):
                if message.role == "assistant" and block.signature:
                    blocks.append({"type": "thinking", "thinking": block.text, "signature": block.signature})
        content = results + blocks
        if content:
            wire.append({"role": message.role, "content": content})
    if cache:
        for item in reversed(wire):
            if item["role"] == "user":
                item["content"][-1] = {**item["content"][-1], "cache_control": _EPHEMERAL}
                break
    return wire
