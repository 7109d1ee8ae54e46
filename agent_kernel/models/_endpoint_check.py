"""models.endpoint_check — does a model endpoint really work? Two real requests, each with a verdict.

``check_endpoint(model)`` makes one streamed completion (does text stream, and how long until its
first token) and one request carrying a tool schema (does the endpoint accept tools, and does the
model call one when asked). It is what ``%agent setup``'s Test button runs: a local server that
streams but rejects tool schemas, a wrong key or base URL, a model name the server does not know,
each gets a verdict that says so in words, never a traceback.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from agent_kernel.errors import AgentKernelError
from agent_kernel.messages import Message
from agent_kernel.models._base import MessageEnd, Model, ModelRequest, TextDelta, ToolCallEnd, ToolSpec

#: The tool the second request offers.
PROBE_TOOL = ToolSpec("get_time", "Returns the current time in a time zone.",
                      {"type": "object", "properties": {"zone": {"type": "string", "description": "e.g. UTC"}},
                       "required": ["zone"]})


@dataclass(frozen=True)
class EndpointVerdict:
    """The outcome of one check.

    Attributes:
        check: ``streaming`` or ``tools``.
        ok: the endpoint did what an agent needs.
        message: what happened, in words (and what to do when it failed).
        first_token_s: streaming: seconds from the request to the first text.
    """

    check: str
    ok: bool
    message: str
    first_token_s: float | None = None


async def check_endpoint(model: Model, *, timeout: float = 60.0) -> list[EndpointVerdict]:
    """Checks ``model``'s endpoint with one streamed completion and one request carrying a tool.

    Example:
        >>> verdicts = await check_endpoint(resolve_model("openai:gpt-4.1"))  # doctest: +SKIP
    """
    return [await _streaming(model, timeout), await _tools(model, timeout)]


async def _streaming(model: Model, timeout: float) -> EndpointVerdict:
    request = ModelRequest(messages=(Message.user("Reply with the single word: ready"),), options={"max_tokens": 16})
    started = time.monotonic()
    first: float | None = None
    text, chunks = "", 0

    async def read() -> None:
        nonlocal first, text, chunks
        async for part in model.stream(request):
            if isinstance(part, TextDelta) and part.text:
                first = first if first is not None else time.monotonic() - started
                text += part.text
                chunks += 1

    try:
        await asyncio.wait_for(read(), timeout)
    except (AgentKernelError, asyncio.TimeoutError, OSError) as exc:
        return EndpointVerdict("streaming", False, f"The streamed request failed: {_said(exc)}")
    if first is None:
        return EndpointVerdict("streaming", False, "The endpoint answered, but with no text: check the model name.")
    how = "streamed" if chunks > 1 else "arrived in one piece (the server may not stream)"
    return EndpointVerdict("streaming", True, f"Text {how}: first token after {first:.2f} s ({text.strip()[:60]!r}).",
                           first_token_s=first)


async def _tools(model: Model, timeout: float) -> EndpointVerdict:
    request = ModelRequest(messages=(Message.user("What time is it in UTC? Call the get_time tool to find out."),),
                           tools=(PROBE_TOOL,), options={"max_tokens": 128})
    called: list[ToolCallEnd] = []

    async def read() -> None:
        async for part in model.stream(request):
            if isinstance(part, ToolCallEnd):
                called.append(part)
            elif isinstance(part, MessageEnd):
                break

    try:
        await asyncio.wait_for(read(), timeout)
    except (AgentKernelError, asyncio.TimeoutError, OSError) as exc:
        return EndpointVerdict("tools", False, f"A request carrying a tool schema failed: {_said(exc)} "
                               "Agents need tool calling: choose a model (or a server option) that supports it.")
    if any(call.name == PROBE_TOOL.name for call in called):
        return EndpointVerdict("tools", True, f"Tool calling works: the model called {PROBE_TOOL.name}.")
    if called:
        return EndpointVerdict("tools", False, f"The model called {called[0].name!r}, a tool it was not offered.")
    return EndpointVerdict("tools", False, "The endpoint accepted the tool schema, but the model answered in text "
                           "instead of calling the tool: agents may not work well with this model.")


def _said(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "no answer in time (is the base URL right, and the server running?)."
    text = str(exc).strip() or type(exc).__name__
    return text if text.endswith(".") else text + "."
