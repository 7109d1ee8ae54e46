"""mcp.sampling — a server's sampling request (``sampling/createMessage``) answered by the agent's model.

The request's messages become a ``ModelRequest`` with no tools (the server asks for text, not
for the agent to act), its system prompt and ``maxTokens`` carried over; the model's text goes back
as a ``CreateMessageResult``. ``summary`` is what the ``mcp_sampling`` event records of the
request: one ``role: text`` line per message, long ones shortened.
"""

from __future__ import annotations

from typing import Any

from agent_kernel.mcp._content import block_text
from agent_kernel.messages import Message, TextBlock
from agent_kernel.models._base import MessageEnd, ModelRequest, TextDelta, Usage

#: Characters of each message the ``mcp_sampling`` event keeps.
SUMMARY_CHARS = 500

# The model's stop reasons in MCP's spelling.
_STOP_REASONS = {"end_turn": "endTurn", "max_tokens": "maxTokens", "stop_sequence": "stopSequence"}


def _text(content: Any) -> str:
    """A sampling message's content (one block or a list of them) as text."""
    blocks = content if isinstance(content, list) else [content]
    return "\n".join(block_text(b) for b in blocks)


def request_summary(params: Any) -> list[str]:
    """One ``role: text`` line per message of the request, each at most ``SUMMARY_CHARS`` long."""
    lines = []
    for message in getattr(params, "messages", None) or ():
        text = " ".join(_text(message.content).split())
        lines.append(f"{message.role}: {text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + '…'}")
    return lines


async def ask_model(model: Any, params: Any) -> tuple[str, str, Usage | None, str | None]:
    """Asks ``model`` for the completion the request wants: its text, stop reason, usage (None:
    the model reported none) and the model the provider says answered (None: it did not say)."""
    messages = tuple(Message(m.role, (TextBlock(_text(m.content)),)) for m in params.messages)
    options = {"max_tokens": int(params.max_tokens)} if getattr(params, "max_tokens", None) else {}
    request = ModelRequest(messages=messages, system=getattr(params, "system_prompt", None), options=options)
    parts: list[str] = []
    stop, usage, served = "end_turn", None, None
    async for event in model.stream(request):
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, MessageEnd):
            stop, usage, served = event.stop_reason, event.usage, event.model
    return "".join(parts), stop, usage, served


def sampling_result(text: str, model_name: str, stop: str) -> Any:
    """The SDK's ``CreateMessageResult`` for ``text``."""
    from mcp import types

    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=text), model=model_name, stop_reason=_STOP_REASONS.get(stop, stop)
    )
