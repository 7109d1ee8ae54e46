"""OpenAI Chat Completions, as strict as the real endpoint about what a request may hold.

``check_chat_request`` raises ``StrictAPIError`` with the API's wording wherever the real
endpoint answers 400: unknown parameters, ``tool_choice`` shapes it does not know or without
tools, tool messages that answer no call, calls left unanswered, ``stream_options`` without
streaming. ``chat_chunks`` renders a neutral turn as the API's stream chunks.
"""

from __future__ import annotations

from typing import Any

from .errors import StrictAPIError
from .turns import Turn, pieces

PARAMETERS = frozenset({
    "model", "messages", "tools", "tool_choice", "stream", "stream_options", "max_tokens", "max_completion_tokens",
    "temperature", "top_p", "stop", "reasoning_effort", "seed", "parallel_tool_calls", "n", "user", "response_format",
    "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty", "logit_bias", "metadata", "store",
    "service_tier", "modalities", "prediction", "audio", "web_search_options", "verbosity", "prompt_cache_key",
    "safety_identifier",
})
_ROLES = {"system", "developer", "user", "assistant", "tool"}


def check_chat_request(body: dict[str, Any]) -> None:
    """Raises ``StrictAPIError`` where the real Chat Completions endpoint rejects ``body``."""
    unknown = sorted(set(body) - PARAMETERS)
    if unknown:
        raise StrictAPIError(400, f"Unrecognized request argument supplied: {unknown[0]}")
    if "model" not in body or "messages" not in body:
        raise StrictAPIError(400, "Missing required parameter: 'model'." if "model" not in body else "Missing required parameter: 'messages'.")
    if "stream_options" in body and not body.get("stream"):
        raise StrictAPIError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    tools = body.get("tools") or []
    names = {t.get("function", {}).get("name") for t in tools}
    choice = body.get("tool_choice")
    if choice is not None:
        if not tools:
            raise StrictAPIError(400, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
        if isinstance(choice, str):
            if choice not in ("none", "auto", "required"):
                raise StrictAPIError(400, f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and 'required'.")
        elif not (isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict)
                  and set(choice) == {"type", "function"} and set(choice["function"]) == {"name"}):
            raise StrictAPIError(400, "Invalid value for 'tool_choice': expected an object with 'type': 'function' and 'function': {'name': ...}.")
        elif choice["function"]["name"] not in names:
            raise StrictAPIError(400, f"Invalid value for 'tool_choice': function '{choice['function']['name']}' is not among the tools.")
    messages = body["messages"]
    if not messages:
        raise StrictAPIError(400, "Invalid 'messages': empty array. Expected an array with minimum length 1.")
    pending: list[str] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in _ROLES:
            raise StrictAPIError(400, f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise StrictAPIError(400, f"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[{i}])")
            if not isinstance(message.get("content"), (str, list)):
                raise StrictAPIError(400, f"Invalid type for 'messages[{i}].content': expected a string.")
            if isinstance(message["content"], list) and any(not isinstance(p, dict) or p.get("type") != "text" for p in message["content"]):
                raise StrictAPIError(400, f"Invalid value for 'messages[{i}].content': a tool message's content parts must be of type 'text'.")
            pending.remove(call_id)
            continue
        if pending:
            raise StrictAPIError(400,
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "
                f"The following tool_call_ids did not have response messages: {', '.join(pending)}"
            )
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if message.get("content") is None and not calls:
                raise StrictAPIError(400, f"Invalid value for 'messages[{i}].content': expected a string, got null.")
            for j, call in enumerate(calls):
                function = call.get("function") or {}
                if call.get("type") != "function" or not isinstance(function.get("arguments"), str) or not isinstance(function.get("name"), str):
                    raise StrictAPIError(400, f"Invalid 'messages[{i}].tool_calls[{j}]': expected type 'function' with string 'name' and 'arguments'.")
                pending.append(call.get("id"))
            if calls and not tools:
                raise StrictAPIError(400, "Invalid 'messages': tool calls in the conversation require 'tools' to be specified.")
        elif not isinstance(message.get("content"), (str, list)):
            raise StrictAPIError(400, f"Invalid type for 'messages[{i}].content': expected a string or array.")
        elif isinstance(message["content"], list):
            for j, part in enumerate(message["content"]):
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "image_url" and role == "user":
                    url = (part.get("image_url") or {}).get("url")
                    if not isinstance(url, str) or not (url.startswith("data:image/") or url.startswith("https://")):
                        raise StrictAPIError(400, f"Invalid 'messages[{i}].content[{j}].image_url.url': expected a URL or a base64 data URL of an image.")
                elif kind != "text" or not isinstance(part.get("text"), str):
                    raise StrictAPIError(400, f"Invalid value: '{kind}'. Supported values are: 'text' and 'image_url'. (messages[{i}].content[{j}].type)")
    if pending:
        raise StrictAPIError(400,
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "
            f"The following tool_call_ids did not have response messages: {', '.join(pending)}"
        )


def chat_chunks(t: Turn, model: str, *, include_usage: bool) -> list[dict[str, Any]]:
    """The stream chunks of one turn, as Chat Completions sends them."""

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
        return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model, "system_fingerprint": "fp_fake", "choices": choices, "usage": usage}

    out = [chunk({"role": "assistant", "content": ""})]
    if t["thinking"]:
        out += [chunk({"reasoning_content": p}) for p in pieces(t["thinking"][0])]
    if t["text"]:
        out += [chunk({"content": p}) for p in pieces(t["text"])]
    for index, (call_id, name, arguments) in enumerate(t["tool_calls"]):
        head = {"index": index, "id": call_id, "type": "function", "function": {"arguments": ""}}
        if name:
            head["function"]["name"] = name
        out.append(chunk({"tool_calls": [head]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in pieces(arguments)]
    finish = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}[t["stop"]]
    out.append(chunk({}, finish))
    if include_usage and t["usage"] is not None:
        u = t["usage"]
        usage: dict[str, Any] = {"prompt_tokens": u["input_tokens"], "completion_tokens": u["output_tokens"], "total_tokens": u["input_tokens"] + u["output_tokens"]}
        if u.get("cache_read_tokens"):
            usage["prompt_tokens_details"] = {"cached_tokens": u["cache_read_tokens"], "audio_tokens": 0}
        out.append(chunk(None, usage=usage))
    return out


def chat_error(status: int, message: str) -> dict[str, Any]:
    """The error body the API sends with ``status``."""
    kind, code = {400: ("invalid_request_error", None), 429: ("rate_limit_error", "rate_limit_exceeded"), 500: ("server_error", None), 503: ("server_error", None)}.get(status, ("server_error", None))
    if "context" in message:
        code = "context_length_exceeded"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
