"""The OpenAI Responses API, as strict as the real endpoint about what a request may hold.

``check_responses_request`` raises ``StrictAPIError`` with the API's wording wherever the real
endpoint answers 400: unknown parameters, a missing ``input``, input items of unknown types or
roles, assistant content parts of user types, ``function_call_output`` items that answer no
earlier ``function_call``, calls left unanswered, reasoning items without a summary, sent by id
without the id of the item that followed them, or with neither id nor encrypted content,
Chat-shaped tools or tool choices, strict tools whose schema is not strict, a named tool choice
that is not among the tools, unknown ``include`` values, ``max_output_tokens`` below 16.
``responses_sse`` renders a neutral turn as the API's server-sent events, which the SDK parses
into its typed stream events; a reasoning item carries its encrypted content only when the
request asked for it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import StrictAPIError
from .turns import Turn, pieces

PARAMETERS = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "stream", "stream_options", "max_output_tokens",
    "max_tool_calls", "temperature", "top_p", "top_logprobs", "reasoning", "text", "include", "store", "metadata",
    "parallel_tool_calls", "previous_response_id", "conversation", "prompt", "prompt_cache_key",
    "prompt_cache_retention", "safety_identifier", "service_tier", "truncation", "user", "background",
    "context_management",
})
_ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning", "item_reference")
_ROLES = ("user", "assistant", "system", "developer")
_USER_PARTS = ("input_text", "input_image", "input_file", "input_audio")
_ASSISTANT_PARTS = ("output_text", "refusal")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_INCLUDABLE = (
    "code_interpreter_call.outputs", "computer_call_output.output.image_url", "file_search_call.results",
    "message.input_image.image_url", "message.output_text.logprobs", "reasoning.encrypted_content",
    "web_search_call.action.sources",
)


def check_responses_request(body: dict[str, Any]) -> None:
    """Raises ``StrictAPIError`` where the real Responses endpoint rejects ``body``."""
    unknown = sorted(set(body) - PARAMETERS)
    if unknown:
        raise StrictAPIError(400, f"Unknown parameter: '{unknown[0]}'.")
    if "model" not in body:
        raise StrictAPIError(400, "Missing required parameter: 'model'.")
    if "input" not in body and not any(k in body for k in ("previous_response_id", "conversation", "prompt")):
        raise StrictAPIError(400, "Missing required parameter: 'input'.")
    if "stream_options" in body and not body.get("stream"):
        raise StrictAPIError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    limit = body.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or limit < 16):
        raise StrictAPIError(400, f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got {limit} instead.")
    for value in body.get("include") or []:
        if value not in _INCLUDABLE:
            raise StrictAPIError(400, f"Invalid value: '{value}'. Supported values are: {', '.join(repr(v) for v in _INCLUDABLE)}. (include)")
    names = _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"), names)
    items = body.get("input")
    if isinstance(items, str) or items is None:
        return
    if not isinstance(items, list):
        raise StrictAPIError(400, "Invalid type for 'input': expected one of a string or an array of input items.")
    _check_items(items, names)


def _check_tools(tools: Any) -> set[str]:
    if tools is None:
        return set()
    names: set[str] = set()
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or t.get("type") != "function":
            raise StrictAPIError(400,
                f"Invalid value: '{t.get('type') if isinstance(t, dict) else t}'. Supported values are: 'function', 'file_search', "
                "'web_search', 'computer_use_preview', 'mcp', 'code_interpreter', 'image_generation', 'local_shell', and 'custom'. "
                f"(tools[{i}].type)"
            )
        if "function" in t or "name" not in t:
            raise StrictAPIError(400, f"Missing required parameter: 'tools[{i}].name'.")
        name = t["name"]
        if not isinstance(name, str) or not _NAME.match(name):
            raise StrictAPIError(400, f"Invalid 'tools[{i}].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
        schema = t.get("parameters")
        if schema is not None and not isinstance(schema, dict):
            raise StrictAPIError(400, f"Invalid type for 'tools[{i}].parameters': expected an object.")
        if t.get("strict", True):
            # Strict mode (the default) demands every property required and no others allowed.
            schema = schema or {}
            if schema.get("additionalProperties") is not False:
                raise StrictAPIError(400, f"Invalid schema for function '{name}': In context=(), 'additionalProperties' is required to be supplied and to be false.")
            missing = sorted(set(schema.get("properties") or {}) - set(schema.get("required") or []))
            if missing:
                raise StrictAPIError(400,
                    f"Invalid schema for function '{name}': In context=(), 'required' is required to be supplied and to be an array including every key in properties. "
                    f"Missing '{missing[0]}'."
                )
        names.add(name)
    return names


def _check_tool_choice(choice: Any, names: set[str]) -> None:
    if choice is None:
        return
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise StrictAPIError(400, f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and 'required'.")
        if choice == "required" and not names:
            raise StrictAPIError(400, "Tool choice 'required' must be specified with 'tools' parameter.")
        return
    if not isinstance(choice, dict):
        raise StrictAPIError(400, "Invalid type for 'tool_choice': expected one of a string or an object.")
    if choice.get("type") != "function":
        raise StrictAPIError(400,
            f"Invalid value: '{choice.get('type')}'. Supported values are: 'function', 'allowed_tools', 'mcp', 'custom', "
            "'file_search', 'web_search_preview', 'computer_use_preview', 'code_interpreter', and 'image_generation'. "
            "(tool_choice.type)"
        )
    if set(choice) != {"type", "name"}:
        extra = sorted(set(choice) - {"type", "name"})
        raise StrictAPIError(400, f"Unknown parameter: 'tool_choice.{extra[0]}'." if extra else "Missing required parameter: 'tool_choice.name'.")
    if choice["name"] not in names:
        raise StrictAPIError(400, f"Tool choice 'function' not found in 'tools' parameter. (function '{choice['name']}')")


def _check_items(items: list[Any], names: set[str]) -> None:
    calls: set[str] = set()
    pending: list[str] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise StrictAPIError(400, f"Invalid type for '{where}': expected an input item object.")
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in _ITEM_TYPES:
            raise StrictAPIError(400, f"Invalid value: '{kind}'. Supported values are: {', '.join(repr(t) for t in _ITEM_TYPES)}. ({where}.type)")
        if kind == "message":
            role = item.get("role")
            if role not in _ROLES:
                raise StrictAPIError(400, f"Invalid value: '{role}'. Supported values are: 'assistant', 'system', 'developer', and 'user'. ({where}.role)")
            if pending and role != "assistant":
                raise StrictAPIError(400, f"No tool output found for function call {pending[0]}.")
            _check_content(item.get("content"), role, where)
        elif kind == "function_call":
            for field in ("call_id", "name", "arguments"):
                if not isinstance(item.get(field), str):
                    raise StrictAPIError(400, f"Missing required parameter: '{where}.{field}'.")
            if not _NAME.match(item["name"]):
                raise StrictAPIError(400, f"Invalid '{where}.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
            calls.add(item["call_id"])
            pending.append(item["call_id"])
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in calls:
                raise StrictAPIError(400, f"No tool call found for function call output with call_id {call_id}.")
            if not isinstance(item.get("output"), (str, list)):
                raise StrictAPIError(400, f"Missing required parameter: '{where}.output'.")
            if call_id in pending:
                pending.remove(call_id)
        elif kind == "reasoning":
            if "id" in item:
                # A stored reasoning item is resolved by id, and only with the item that followed it.
                following = items[i + 1] if i + 1 < len(items) else {}
                if not isinstance(following, dict) or not following.get("id"):
                    raise StrictAPIError(400, f"Item '{item['id']}' of type 'reasoning' was provided without its required following item.")
            elif not isinstance(item.get("encrypted_content"), str):
                raise StrictAPIError(400, f"Missing required parameter: '{where}.id'.")
            summary = item.get("summary")
            if not isinstance(summary, list):
                raise StrictAPIError(400, f"Missing required parameter: '{where}.summary'.")
            for j, part in enumerate(summary):
                if not isinstance(part, dict) or part.get("type") != "summary_text" or not isinstance(part.get("text"), str):
                    raise StrictAPIError(400, f"Invalid value for '{where}.summary[{j}]': expected an object with 'type': 'summary_text' and a string 'text'.")
    if pending:
        raise StrictAPIError(400, f"No tool output found for function call {pending[0]}.")


def _check_content(content: Any, role: str, where: str) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise StrictAPIError(400, f"Invalid type for '{where}.content': expected one of a string or an array of content parts.")
    allowed = _ASSISTANT_PARTS if role == "assistant" else _USER_PARTS
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            quoted = " and ".join(f"'{a}'" for a in allowed) if len(allowed) == 2 else ", ".join(f"'{a}'" for a in allowed)
            raise StrictAPIError(400, f"Invalid value: '{kind}'. Supported values are: {quoted}. ({where}.content[{j}].type)")


# ---------------------------------------------------------------------------- the stream


def responses_sse(t: Turn, model: str, *, encrypted: bool = True) -> bytes:
    """The server-sent events of one turn, as the Responses API streams it.

    ``encrypted``: whether the request asked for ``reasoning.encrypted_content``; the turn's
    thinking signature is then the reasoning item's encrypted content.
    """
    events = responses_events(t, model, encrypted=encrypted)
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def responses_events(t: Turn, model: str, *, encrypted: bool = True) -> list[dict[str, Any]]:
    """The stream events of one turn (``sequence_number`` in order)."""
    out: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        out.append({"type": kind, "sequence_number": len(out), **fields})

    output: list[dict[str, Any]] = []
    emit("response.created", response=_response(model, "in_progress", []))
    emit("response.in_progress", response=_response(model, "in_progress", []))
    if t["thinking"]:
        text, signature = t["thinking"]
        index, item_id = len(output), "rs_fake_0"
        emit("response.output_item.added", output_index=index, item={"id": item_id, "type": "reasoning", "summary": []})
        part = {"type": "summary_text", "text": ""}
        emit("response.reasoning_summary_part.added", item_id=item_id, output_index=index, summary_index=0, part=part)
        for p in pieces(text):
            emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=index, summary_index=0, delta=p)
        emit("response.reasoning_summary_text.done", item_id=item_id, output_index=index, summary_index=0, text=text)
        emit("response.reasoning_summary_part.done", item_id=item_id, output_index=index, summary_index=0, part={"type": "summary_text", "text": text})
        item = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}], "encrypted_content": signature if encrypted else None}
        output.append(item)
        emit("response.output_item.done", output_index=index, item=item)
    if t["text"]:
        index, item_id = len(output), "msg_fake_0"
        emit("response.output_item.added", output_index=index, item={"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []})
        emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part={"type": "output_text", "text": "", "annotations": []})
        for p in pieces(t["text"]):
            emit("response.output_text.delta", item_id=item_id, output_index=index, content_index=0, delta=p, logprobs=[])
        emit("response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=t["text"], logprobs=[])
        done_part = {"type": "output_text", "text": t["text"], "annotations": []}
        emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=done_part)
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed", "content": [done_part]}
        output.append(item)
        emit("response.output_item.done", output_index=index, item=item)
    for n, (call_id, name, arguments) in enumerate(t["tool_calls"]):
        index, item_id = len(output), f"fc_fake_{n}"
        head = {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_id, "name": name, "arguments": ""}
        emit("response.output_item.added", output_index=index, item=head)
        for p in pieces(arguments):
            emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=p)
        emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
        item = {**head, "status": "completed", "arguments": arguments}
        output.append(item)
        emit("response.output_item.done", output_index=index, item=item)
    usage = None
    if t["usage"] is not None:
        u = t["usage"]
        usage = {
            "input_tokens": u["input_tokens"], "input_tokens_details": {"cached_tokens": u.get("cache_read_tokens", 0)},
            "output_tokens": u["output_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u["input_tokens"] + u["output_tokens"],
        }
    if t["stop"] == "max_tokens":
        final = _response(model, "incomplete", output, usage)
        final["incomplete_details"] = {"reason": "max_output_tokens"}
        emit("response.incomplete", response=final)
    else:
        emit("response.completed", response=_response(model, "completed", output, usage))
    return out


def _response(model: str, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "resp_fake", "object": "response", "created_at": 1_700_000_000, "status": status, "model": model,
        "output": list(output), "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
        "parallel_tool_calls": True, "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": [],
        "max_output_tokens": None, "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
        "text": {"format": {"type": "text"}}, "truncation": "disabled", "usage": usage, "user": None, "store": True,
    }


def responses_failed(code: str, message: str, model: str = "gpt-4.1") -> dict[str, Any]:
    """A ``response.failed`` event carrying ``code`` and ``message``."""
    response = _response(model, "failed", [])
    response["error"] = {"code": code, "message": message}
    return {"type": "response.failed", "sequence_number": 1, "response": response}
