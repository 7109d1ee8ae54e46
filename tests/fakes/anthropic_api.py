"""The Anthropic Messages API, as strict as the real one about what a request may hold.

``check_anthropic_request`` raises ``StrictAPIError`` with the API's wording wherever the real
endpoint answers 400: unknown parameters, roles that do not alternate, a tool_use without its
tool_result right after, tool blocks without tool definitions, a malformed ``tool_choice``,
empty text blocks, unsigned thinking, more than four cache breakpoints.
``anthropic_events`` renders a neutral turn as the API's stream events.
"""

from __future__ import annotations

import base64
from typing import Any

from .errors import StrictAPIError
from .turns import Turn, pieces

PARAMETERS = frozenset({
    "model", "messages", "max_tokens", "system", "tools", "tool_choice", "stream", "temperature", "top_p",
    "top_k", "stop_sequences", "metadata", "thinking", "service_tier", "container", "mcp_servers",
    "context_management", "output_config",
})
_TOOL_CHOICE_TYPES = {"auto", "any", "none", "tool"}


def check_anthropic_request(body: dict[str, Any]) -> None:
    """Raises ``StrictAPIError`` where the real Messages API rejects ``body``."""
    unknown = sorted(set(body) - PARAMETERS)
    if unknown:
        raise StrictAPIError(400, f"{unknown[0]}: Extra inputs are not permitted")
    for required in ("model", "messages", "max_tokens"):
        if required not in body:
            raise StrictAPIError(400, f"{required}: Field required")
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        raise StrictAPIError(400, "max_tokens: Input should be greater than or equal to 1")
    tools = body.get("tools") or []
    names = {t.get("name") for t in tools}
    _check_tool_choice(body.get("tool_choice"), names)
    _check_thinking(body)
    messages = body["messages"]
    if not messages:
        raise StrictAPIError(400, "messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise StrictAPIError(400, "messages: first message must use the \"user\" role")
    breakpoints = _count_cache_control(body.get("system")) + _count_cache_control(tools)
    pending: list[str] = []
    seen_ids: set[str] = set()  # tool_use ids across the whole request
    previous = None
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise StrictAPIError(400, f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if role == previous:
            raise StrictAPIError(400, "messages: roles must alternate between \"user\" and \"assistant\"")
        previous = role
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            raise StrictAPIError(400, f"messages.{i}: all messages must have non-empty content")
        breakpoints += _count_cache_control(blocks)
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if pending:
            missing = [p for p in pending if p not in results]
            if missing:
                raise StrictAPIError(400,
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(missing)}. "
                    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                )
            if blocks[: len(results)] != [b for b in blocks if b.get("type") == "tool_result"]:
                raise StrictAPIError(400, f"messages.{i}: tool_result blocks must come first in the user message")
        elif results:
            raise StrictAPIError(400,
                f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {results[0]}. "
                "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
            )
        pending = []
        for j, block in enumerate(blocks):
            kind = block.get("type")
            where = f"messages.{i}.content.{j}"
            if kind == "text":
                if not isinstance(block.get("text"), str) or not block["text"]:
                    raise StrictAPIError(400, f"{where}: text content blocks must be non-empty")
            elif kind == "tool_use":
                if role != "assistant":
                    raise StrictAPIError(400, f"{where}: tool_use blocks are only allowed in assistant messages")
                if not isinstance(block.get("input"), dict):
                    raise StrictAPIError(400, f"{where}.input: Input should be a valid dictionary")
                if not block.get("name"):
                    raise StrictAPIError(400, f"{where}.name: String should have at least 1 character")
                if block.get("id") in seen_ids:
                    raise StrictAPIError(400, f"{where}: `tool_use` ids must be unique")
                seen_ids.add(block.get("id"))
                pending.append(block.get("id"))
            elif kind == "tool_result":
                if role != "user":
                    raise StrictAPIError(400, f"{where}: tool_result blocks are only allowed in user messages")
                _check_result_content(block.get("content"), where)
            elif kind == "thinking":
                if role != "assistant" or not block.get("signature"):
                    raise StrictAPIError(400, f"{where}.signature: Field required")
            elif kind == "redacted_thinking":
                pass
            else:
                raise StrictAPIError(400, f"{where}.type: unknown content block type {kind!r}")
            if kind in ("tool_use", "tool_result") and not tools:
                raise StrictAPIError(400, "Requests which include `tool_use` or `tool_result` blocks must define tools.")
    if breakpoints > 4:
        raise StrictAPIError(400, f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}.")


_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _check_result_content(content: Any, where: str) -> None:
    """A tool_result's content: a string, or a list of text and image blocks."""
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise StrictAPIError(400, f"{where}.content: Input should be a valid string or list")
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str) or not part["text"]:
                raise StrictAPIError(400, f"{where}.content.{k}: text content blocks must be non-empty")
        elif kind == "image":
            source = part.get("source") or {}
            if source.get("type") != "base64" or source.get("media_type") not in _IMAGE_TYPES or not isinstance(source.get("data"), str):
                raise StrictAPIError(400, f"{where}.content.{k}.source: expected a base64 source with a media_type of {', '.join(_IMAGE_TYPES)}")
            try:
                base64.b64decode(source["data"], validate=True)
            except ValueError:
                raise StrictAPIError(400, f"{where}.content.{k}.source.data: invalid base64 data") from None
        else:
            raise StrictAPIError(400, f"{where}.content.{k}.type: Input tag {kind!r} found does not match any of the expected tags: 'text', 'image'")


def _check_tool_choice(choice: Any, names: set[Any]) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict) or choice.get("type") not in _TOOL_CHOICE_TYPES:
        raise StrictAPIError(400, "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'")
    if not names:
        raise StrictAPIError(400, "tool_choice may only be specified while providing tools.")
    allowed = {"type", "disable_parallel_tool_use"} | ({"name"} if choice["type"] == "tool" else set())
    if set(choice) - allowed:
        raise StrictAPIError(400, f"tool_choice.{sorted(set(choice) - allowed)[0]}: Extra inputs are not permitted")
    if choice["type"] == "tool" and choice.get("name") not in names:
        raise StrictAPIError(400, f"tool_choice.name: tool {choice.get('name')!r} is not among the tools provided")


def _check_thinking(body: dict[str, Any]) -> None:
    thinking = body.get("thinking")
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise StrictAPIError(400, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if budget >= body["max_tokens"]:
            raise StrictAPIError(400, "`max_tokens` must be greater than `thinking.budget_tokens`.")
        choice = body.get("tool_choice") or {}
        if choice.get("type") in ("any", "tool"):
            raise StrictAPIError(400, "Thinking may not be enabled when tool_choice forces tool use.")
    elif kind not in ("disabled", "adaptive"):
        raise StrictAPIError(400, "thinking: Input tag does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'")


def _count_cache_control(blocks: Any) -> int:
    if not isinstance(blocks, list):
        return 0
    return sum(1 for b in blocks if isinstance(b, dict) and "cache_control" in b)


def anthropic_events(t: Turn, model: str) -> list[dict[str, Any]]:
    """The stream events of one turn, as the Messages API sends them."""
    usage = t["usage"] or {"input_tokens": 0, "output_tokens": 0}
    events: list[dict[str, Any]] = [{
        "type": "message_start",
        "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {
                "input_tokens": usage["input_tokens"], "output_tokens": 1,
                "cache_creation_input_tokens": usage.get("cache_write_tokens", 0), "cache_read_input_tokens": usage.get("cache_read_tokens", 0),
            },
        },
    }, {"type": "ping"}]
    index = 0
    if t["thinking"]:
        text, signature = t["thinking"]
        events.append({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        events += [{"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": p}} for p in pieces(text)]
        events.append({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": signature}})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    if t["text"]:
        events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        events += [{"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}} for p in pieces(t["text"])]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    for call_id, name, arguments in t["tool_calls"]:
        events.append({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}})
        events += [{"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}} for p in pieces(arguments)]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.append({"type": "message_delta", "delta": {"stop_reason": t["stop"], "stop_sequence": None}, "usage": {"output_tokens": usage["output_tokens"]}})
    events.append({"type": "message_stop"})
    return events


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """The error body the API sends with ``status``."""
    kind = {400: "invalid_request_error", 401: "authentication_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
