"""models.base — the Model protocol, the request it takes and the stream events it yields.

A model adapter turns one ``ModelRequest`` into an async stream of model-level events: text and
thinking deltas, tool calls (start, argument fragments, end), and one ``MessageEnd`` with the stop
reason and usage. Failures are raised as ``ModelError``; the loop owns retries and fallback so
they are visible as events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from agent_kernel.messages import Message

if TYPE_CHECKING:
    from agent_kernel.events.payloads import UsageDict


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to a model: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one model call. Cache tokens are reported separately from ``input_tokens``."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def to_dict(self) -> UsageDict:
        """A JSON-serialisable dict."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs.

    ``tools`` empty means tools are disabled for this call (the final answer at max_iterations).
    ``options`` carries provider-specific settings (e.g. ``max_tokens``, ``thinking_budget``).
    """

    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A fragment of assistant text."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A fragment of reasoning; ``signature`` arrives (once) at the end of a thinking block."""

    text: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool_use block began. ``index`` is its position among this response's tool calls."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call's JSON arguments."""

    index: int
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """A tool_use block is complete; ``arguments`` is the whole raw JSON text."""

    index: int
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class MessageEnd:
    """The response is complete."""

    stop_reason: str
    #: What the call consumed; None when the provider reported nothing, so its cost is unknown.
    usage: Usage | None = Usage()
    model: str | None = None


StreamEvent = Union[TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, ToolCallEnd, MessageEnd]


@runtime_checkable
class Model(Protocol):
    """A streaming chat model.

    Attributes:
        name: the model's id as the provider knows it (used for pricing and display).
        provider: ``anthropic``, ``openai``, ``offline``, ``scripted``, ...
        context_window: tokens the model accepts in one request.
    """

    name: str
    provider: str
    context_window: int

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Streams one response to ``request``; raises ``ModelError`` on failure."""
        ...
