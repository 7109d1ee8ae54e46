"""models.offline — the model used when no real one is configured: deterministic, keyless, useful.

``OfflineModel`` answers without a language model. With no tools it says what it is and how to
configure a real model. With tools it exercises them: on the first call of an exchange it calls
the tools the prompt names (else every tool once) with arguments generated from their JSON
schemas; on the next call it summarises the results it sees. Output streams in small chunks with
a small delay, so notebooks, Binder and demos show live streaming with no key.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..messages import Message, SummaryBlock, TextBlock, ToolResultBlock, ToolUseBlock
from .base import ModelRequest, StreamEvent, ToolSpec
from .scripted import Part, stream_parts, text, tool_call

__all__ = ["OfflineModel", "example_arguments"]

SETUP_HINT = (
    "To use a real model, set AGENT_KERNEL_MODEL (for example 'anthropic:claude-sonnet-4-6' or "
    "'openai:gpt-4.1'), or set ANTHROPIC_API_KEY or OPENAI_API_KEY, or pass model=... to Agent."
)
_RESULT_PREVIEW = 200


class OfflineModel:
    """A deterministic stand-in model that needs no key and no network.

    Args:
        delay: seconds before each streamed chunk (0 for tests).
        chunk: characters per text delta.
        context_window: tokens it claims to accept (for context management).

    Example:
        >>> from agent_kernel import Agent  # doctest: +SKIP
        >>> Agent(model="offline", tools=[add]).run_sync("add 2 and 3")  # doctest: +SKIP
    """

    provider = "offline"
    name = "offline"

    def __init__(self, *, delay: float = 0.01, chunk: int = 12, context_window: int = 200_000) -> None:
        self.delay = delay
        self.chunk = chunk
        self.context_window = context_window

    def __repr__(self) -> str:
        return "OfflineModel()"

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Streams the offline answer to ``request``."""
        # The number of messages seeds the call ids, so the same conversation gives the same ids.
        return stream_parts(self.respond(request), request, len(request.messages), self.name)

    def respond(self, request: ModelRequest) -> list[Part]:
        """The parts of the answer to ``request`` (what ``stream`` streams)."""
        prompt, since = _exchange(request.messages)
        results = [b for m in since for b in m.content if isinstance(b, ToolResultBlock)]
        called = {b.id: b for m in since for b in m.content if isinstance(b, ToolUseBlock)}
        if called:
            return [self._text(_summary(called, results))]
        if request.tools:
            chosen = _chosen_tools(prompt, request.tools)
            names = ", ".join(t.name for t in chosen)
            intro = f"(offline model) Calling {names} with arguments made from their schemas."
            parts: list[Part] = [self._text(intro)]
            parts += [tool_call(t.name, example_arguments(t.parameters), delay=self.delay) for t in chosen]
            return parts
        echo = f' You said: "{_shorten(prompt, 80)}".' if prompt else ""
        return [self._text(f"This is the offline model, a stand-in that answers without a language model.{echo} {SETUP_HINT}")]

    def _text(self, content: str) -> Part:
        return text(content, chunk=self.chunk, delay=self.delay)


def _exchange(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    """The last prompt (a user message with text) and the messages after it."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role == "user" and any(isinstance(b, (TextBlock, SummaryBlock)) and b.text for b in message.content):
            return message.text, list(messages[i + 1 :])
    return "", list(messages)


def _chosen_tools(prompt: str, tools: Sequence[ToolSpec]) -> list[ToolSpec]:
    words = set(re.findall(r"[\w-]+", prompt.lower()))
    named = [t for t in tools if t.name.lower() in words]
    return named or list(tools)


def _summary(called: dict[str, ToolUseBlock], results: Sequence[ToolResultBlock]) -> str:
    lines = [f"(offline model) I called {len(called)} tool{'s' if len(called) != 1 else ''}:"]
    seen = set()
    for result in results:
        use = called.get(result.tool_use_id)
        name = use.name if use is not None else result.tool_use_id
        status = "failed" if result.is_error else "returned"
        lines.append(f"- {name} {status}: {_shorten(result.content, _RESULT_PREVIEW)}")
        seen.add(result.tool_use_id)
    for call_id, use in called.items():
        if call_id not in seen:
            lines.append(f"- {use.name}: no result yet")
    lines.append(SETUP_HINT)
    return "\n".join(lines)


def _shorten(s: str, limit: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy an object ``schema``: its required properties, each with an example.

    Defaults, ``const``, ``enum`` and ``examples`` are used when the schema gives them; otherwise
    a plain value of the type (``"example"``, 1, 1.0, True, ``[]`` of one item, nested objects).
    Local ``$ref``s into ``$defs`` are followed.
    """
    value = _example(schema, schema, depth=0)
    return value if isinstance(value, dict) else {}


def _example(schema: Any, root: dict[str, Any], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _example(target, root, depth + 1)
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, []) if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            return _example(options[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties", {})
        return {name: _example(properties.get(name, {}), root, depth + 1) for name in schema.get("required", [])}
    if kind == "array":
        return [_example(schema.get("items", {}), root, depth + 1)]
    return {"string": "example", "integer": 1, "number": 1.0, "boolean": True}.get(kind or "", None)
