"""models.openai_responses — the OpenAI Responses API wire: request items out, stream events in.

``OpenAIModel(api="responses")`` (the default against api.openai.com) sends one streamed
``responses.create`` per request; this module owns both halves of that wire, and ``openai.py``
dispatches to it.

**Out.** The conversation becomes ``input`` items: user and assistant messages, a
``function_call`` item per tool call and a ``function_call_output`` item per result (placed
before the user's text, so every call is answered before the next message), and a ``reasoning``
item per thinking block that came from a Responses model with its encrypted content. The system
prompt is
``instructions``; tools are flat ``{"type": "function", "name", ...}`` definitions sent with
``strict: false``, since strict mode (the API's default) demands schemas most tools do not have.
Options map to ``max_output_tokens``, ``temperature``, ``top_p`` and ``reasoning.effort``;
``stop`` has no Responses counterpart and is not sent; ``{"openai": {...}}`` settings go to
``responses.create`` as they are (a ``reasoning`` dict there adds to the effort).

**Reasoning round trip.** A reasoning item's ``id`` and ``encrypted_content`` travel in the
thinking block's ``signature`` (as the Anthropic adapter keeps its signature there), encoded as a
small JSON object whose ``type`` is ``openai.reasoning``; the summary text is the block's text.
The item goes back statelessly, as its summary and encrypted content without the id: an item
sent by id must be followed by the ids of the items that came after it, which the neutral
messages do not keep, and the API refuses it without them. The encrypted content comes only when
asked for (``include: ["reasoning.encrypted_content"]``, sent whenever ``reasoning_effort`` is
set); reasoning without it, or a thinking block signed any other way (an Anthropic model's before
a fallback, say), is left out, which the API accepts.

**In.** The SDK's typed stream events become model stream events: text and refusal deltas as
text, reasoning summary (and reasoning text) deltas as thinking, each function call started at
``response.output_item.added``, fed by ``response.function_call_arguments.delta`` and ended at
its ``response.output_item.done`` (so the executor can start a tool while the model writes the
next one). ``response.completed`` and ``response.incomplete`` end the message with usage (None
when a server reports none); ``response.failed`` and ``error`` events leave as ``ModelError``
classified by their code.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import openai

from agent_kernel.errors import ModelError
from agent_kernel.messages import Message, SummaryBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models._base import MessageEnd, ModelRequest, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolSpec, Usage
from agent_kernel.models._options import ToolChoice, check_options, provider_extras, tool_choice
from agent_kernel.models._sdk_errors import map_openai_error, stream_cut

_SIGNATURE_TYPE = "openai.reasoning"

# Why a response stopped early (``incomplete_details.reason``), in MessageEnd's vocabulary.
_INCOMPLETE = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


# ---------------------------------------------------------------------------- the request


def responses_params(name: str, request: ModelRequest, *, max_tokens: int | None = None) -> dict[str, Any]:
    """The keyword arguments of the ``responses.create`` call for ``request`` (without ``stream``).

    Args:
        name: the model id.
        request: the neutral request.
        max_tokens: the model's default output limit, used when the options give none.
    """
    check_options(request.options)
    options = request.options
    params: dict[str, Any] = {"model": name, "input": to_responses_input(request.messages)}
    if request.system:
        params["instructions"] = request.system
    if request.tools:
        params["tools"] = to_responses_tools(request.tools)
        choice = tool_choice(options)
        if choice is not None:
            params["tool_choice"] = to_responses_tool_choice(choice)
    limit = options.get("max_tokens", max_tokens)
    if limit is not None:
        params["max_output_tokens"] = int(limit)
    for key in ("temperature", "top_p"):
        if key in options:
            params[key] = options[key]
    if "reasoning_effort" in options:
        params["reasoning"] = {"effort": options["reasoning_effort"]}
        # What lets the reasoning go back with the history (see the module docstring).
        params["include"] = ["reasoning.encrypted_content"]
    extras = provider_extras(options, "openai")
    if isinstance(extras.get("reasoning"), Mapping) and "reasoning" in params:
        # {"openai": {"reasoning": {"summary": "auto"}}} adds to the effort instead of replacing it.
        extras["reasoning"] = {**params["reasoning"], **extras["reasoning"]}
    params.update(extras)
    return params


def to_responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool definitions in the Responses shape (flat, non-strict)."""
    return [
        {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": False}
        for t in tools
    ]


def to_responses_tool_choice(choice: ToolChoice) -> str | dict[str, str]:
    """The neutral tool choice in the Responses shape: a mode, or ``{"type": "function", "name": ...}``."""
    if isinstance(choice, str):
        return choice
    return {"type": "function", "name": choice["name"]}


def to_responses_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as Responses ``input`` items, in conversation order.

    An assistant message becomes its items in block order (reasoning, text, function calls); a
    user message's tool results come first as ``function_call_output`` items, then its text.
    Summaries are sent as text; empty text is skipped.
    """
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            text: list[str] = []
            for block in message.content:
                if isinstance(block, (TextBlock, SummaryBlock)):
                    text.append(block.text)
                    continue
                _flush_text(items, "assistant", text)
                if isinstance(block, ToolUseBlock):
                    items.append({"type": "function_call", "call_id": block.id, "name": block.name, "arguments": arguments_json(block.input)})
                elif isinstance(block, ThinkingBlock):
                    item = reasoning_item(block)
                    if item is not None:
                        items.append(item)
            _flush_text(items, "assistant", text)
        else:
            pictures: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    output = block.content if not block.is_error else f"Error: {block.content}"
                    items.append({"type": "function_call_output", "call_id": block.tool_use_id, "output": output})
                    for image in block.images:
                        pictures.append({"type": "input_text", "text": f"Image from the {block.tool_use_id} result{': ' + image.alt if image.alt else ''}"})
                        pictures.append({"type": "input_image", "image_url": f"data:{image.media_type};base64,{image.data}", "detail": "auto"})
            if pictures:  # after the outputs, as the user's message: the images the tools showed
                items.append({"role": "user", "content": pictures})
            _flush_text(items, "user", [b.text for b in message.content if isinstance(b, (TextBlock, SummaryBlock))])
    return items


def _flush_text(items: list[dict[str, Any]], role: str, text: list[str]) -> None:
    joined = "".join(text)
    text.clear()
    if joined:
        items.append({"role": role, "content": joined})


def reasoning_signature(item_id: str, encrypted_content: str | None = None) -> str:
    """The thinking-block signature that carries a reasoning item back to the API."""
    data: dict[str, str] = {"type": _SIGNATURE_TYPE, "id": item_id}
    if encrypted_content:
        data["encrypted_content"] = encrypted_content
    return json.dumps(data, separators=(",", ":"))


def reasoning_item(block: ThinkingBlock) -> dict[str, Any] | None:
    """The ``reasoning`` input item for a thinking block, or None when it cannot be sent back.

    Only a block from this API with encrypted content can: see the module docstring.
    """
    signature = block.signature
    if not signature or not signature.startswith("{"):
        return None
    try:
        data = json.loads(signature)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("type") != _SIGNATURE_TYPE:
        return None
    encrypted = data.get("encrypted_content")
    if not isinstance(encrypted, str) or not encrypted:
        return None
    summary = [{"type": "summary_text", "text": block.text}] if block.text else []
    return {"type": "reasoning", "summary": summary, "encrypted_content": encrypted}


def arguments_json(arguments: dict[str, Any]) -> str:
    """A tool call's arguments as the JSON text to send back (shared by both OpenAI wires)."""
    # Arguments the model sent that were not JSON are kept as {"_raw": text}: send back what it sent.
    if set(arguments) == {"_raw"} and isinstance(arguments["_raw"], str):
        return arguments["_raw"]
    return json.dumps(arguments)


# ---------------------------------------------------------------------------- the stream


async def responses_events(sdk_stream: Any, model: str) -> AsyncIterator[StreamEvent]:
    """The model stream events of one streamed ``responses.create``; closes ``sdk_stream`` at the end.

    Raises:
        ModelError: the API reported a failure, the transport failed, or the stream ended before
            the response did.
    """
    started = finished = refused = False
    stop_reason = "end_turn"
    usage: Usage | None = None  # stays None when the server reports none: the cost is unknown, not zero
    # output_index -> [tool index, call id, name, argument fragments]
    calls: dict[int, list[Any]] = {}
    n_tools = 0
    thought: set[str] = set()  # reasoning items whose text has streamed
    said: set[str] = set()  # message items whose text has streamed
    try:
        async for event in sdk_stream:
            started = True
            kind = event.type
            if kind == "response.output_text.delta":
                said.add(event.item_id)
                yield TextDelta(event.delta)
            elif kind == "response.function_call_arguments.delta":
                call = calls.get(event.output_index)
                if call is not None and event.delta:
                    call[3].append(event.delta)
                    yield ToolCallDelta(call[0], event.delta)
            elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                thought.add(event.item_id)
                yield ThinkingDelta(event.delta)
            elif kind == "response.reasoning_summary_part.added":
                if event.summary_index > 0 and event.item_id in thought:
                    yield ThinkingDelta("\n\n")  # summary parts are paragraphs of one block
            elif kind == "response.output_item.added":
                item = event.item
                if item.type == "function_call":
                    calls[event.output_index] = call = [n_tools, item.call_id, item.name or "", []]
                    n_tools += 1
                    yield ToolCallStart(call[0], call[1], call[2])
            elif kind == "response.output_item.done":
                item = event.item
                if item.type == "function_call":
                    call = calls.pop(event.output_index, None)
                    if call is None:  # never announced as added: announce it now, whole
                        call = [n_tools, item.call_id, item.name or "", []]
                        n_tools += 1
                        yield ToolCallStart(call[0], call[1], call[2])
                    yield ToolCallEnd(call[0], call[1], call[2], item.arguments or "".join(call[3]) or "{}")
                else:
                    for out in _item_done(item, thought, said):
                        yield out
            elif kind == "response.refusal.delta":
                refused = True
                said.add(event.item_id)
                yield TextDelta(event.delta)
            elif kind in ("response.completed", "response.incomplete"):
                response = event.response
                model = response.model or model
                usage = _usage(getattr(response, "usage", None))
                details = getattr(response, "incomplete_details", None)
                if kind == "response.incomplete":
                    reason = getattr(details, "reason", None) or "incomplete"
                    stop_reason = _INCOMPLETE.get(reason, reason)
                elif n_tools:
                    stop_reason = "tool_use"
                elif refused:
                    stop_reason = "refusal"
                for call in calls.values():
                    # A call cut off by the output limit: ended as it stands (its arguments then
                    # fail to parse, and the model reads why), never left dangling.
                    yield ToolCallEnd(call[0], call[1], call[2], "".join(call[3]) or "{}")
                calls.clear()
                finished = True
            elif kind == "response.created":
                model = event.response.model or model
            elif kind == "response.failed":
                error = getattr(event.response, "error", None)
                raise _failure(sdk_stream, getattr(error, "code", None), getattr(error, "message", None) or "the response failed")
            elif kind == "error":
                raise _failure(sdk_stream, event.code, event.message)
    except ModelError:
        raise
    except Exception as exc:
        error = map_openai_error(exc, started=started)
        if not finished or error.kind not in ("stream_cut", "timeout"):
            raise error from exc
        # The response was complete; only the end of the HTTP body was lost.
    finally:
        await sdk_stream.close()
    if not finished:
        raise stream_cut("OpenAI", "the stream ended before response.completed")
    yield MessageEnd(stop_reason, usage, model)


def _item_done(item: Any, thought: set[str], said: set[str]) -> list[StreamEvent]:
    """What the end of a non-call output item means: a reasoning item signs its thinking."""
    out: list[StreamEvent] = []
    if item.type == "reasoning":
        if item.id not in thought:
            # Nothing streamed for this item (a server that sends it whole): its text now.
            text = "\n\n".join(s.text for s in (item.summary or []) if s.text)
            text = text or "".join(c.text for c in (getattr(item, "content", None) or []) if c.text)
            if text:
                out.append(ThinkingDelta(text))
        out.append(ThinkingDelta("", reasoning_signature(item.id, getattr(item, "encrypted_content", None))))
    elif item.type == "message" and item.id not in said:
        text = "".join(getattr(c, "text", None) or getattr(c, "refusal", None) or "" for c in (item.content or []))
        if text:
            out.append(TextDelta(text))
    return out


def _failure(sdk_stream: Any, code: str | None, message: str) -> ModelError:
    """The ``ModelError`` for a failure the API reported inside the stream."""
    response = getattr(sdk_stream, "response", None)
    request = getattr(response, "request", None)
    exc = openai.APIError(message, request, body={"code": code, "message": message, "type": code})  # type: ignore[arg-type]
    return map_openai_error(exc, started=True)


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    total = getattr(usage, "input_tokens", None) or 0
    details = getattr(usage, "input_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    # Usage counts cache reads apart from input; the API's input_tokens includes them.
    return Usage(input_tokens=total - cached, output_tokens=getattr(usage, "output_tokens", None) or 0, cache_read_tokens=cached)
