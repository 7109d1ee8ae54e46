"""context.tokens — token estimates for messages, tools and requests, calibrated from usage.

Provider-reported usage is the truth for what was sent; everything not yet sent is estimated from
its characters with a per-provider characters-per-token ratio (no tokenizer is downloaded). After
each model call, ``calibrate`` compares the provider's input-token count with the raw estimate of
the same request and moves a correction factor towards their ratio, so the estimates track the
provider's real tokenizer over a session.

A request's estimate is the sum of its system, tools and messages estimates, which is what the
``context_assembled`` event reports per component.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

from agent_kernel.messages import Message
from agent_kernel.models._base import ModelRequest, ToolSpec, Usage

#: Characters per token by provider: English prose and code measured against each provider's
#: tokenizer land near these; calibration corrects the rest.
CHARS_PER_TOKEN: dict[str, float] = {"anthropic": 3.5, "openai": 4.0}
DEFAULT_CHARS_PER_TOKEN = 4.0

# Role markers and block framing cost a few tokens per message and per tool definition.
_MESSAGE_OVERHEAD = 4.0
_TOOL_OVERHEAD = 8.0
_SYSTEM_OVERHEAD = 4.0

# A single noisy call (a tiny request, a provider quirk) must not throw the estimates far off.
_MIN_SCALE, _MAX_SCALE = 0.25, 4.0
_MIN_CALIBRATION_TOKENS = 64
_CACHE_LIMIT = 8192
# The message cache also stops at this many characters: it holds the messages themselves, so a count
# alone would keep thousands of long tool results alive after compaction dropped them (about 1M
# tokens of text: more than any window, so a live conversation never thrashes it).
_CACHE_CHARS = 4_000_000


def reported_input_tokens(usage: Usage) -> int:
    """All input tokens a provider counted for one call (cache reads and writes included)."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


class TokenCounter:
    """Estimates tokens for one provider, calibrated by what that provider reports.

    An estimate is ``ceil(scale * raw)``, where ``raw`` is characters divided by the ratio plus a
    small framing cost per message, tool and system prompt, and ``scale`` is the calibration.
    Raw figures come from integer character totals, so the same content always gets the same
    estimate whichever order it was added up in.

    Args:
        provider: the model's provider (``anthropic``, ``openai``, ...); picks the starting ratio.
        chars_per_token: overrides the provider's ratio.
        smoothing: weight of the newest observation when calibrating (1.0 = trust only the last).

    Example:
        >>> counter = TokenCounter("openai")
        >>> counter.text("x" * 400)
        100
    """

    __slots__ = ("provider", "chars_per_token", "scale", "smoothing", "observations", "_chars", "_cached_chars", "_tool_chars")

    def __init__(self, provider: str = "", chars_per_token: float | None = None, *, smoothing: float = 0.5) -> None:
        if chars_per_token is not None and chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be positive, got {chars_per_token}; 4.0 suits most English text")
        if not 0.0 < smoothing <= 1.0:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        self.provider = provider
        self.chars_per_token = chars_per_token or CHARS_PER_TOKEN.get(provider, DEFAULT_CHARS_PER_TOKEN)
        self.scale = 1.0
        self.smoothing = smoothing
        self.observations = 0
        # Messages are frozen, so their character counts never change; the loop passes the same
        # message objects on every call, so remembering the count keeps estimation linear in
        # what is new. The stored object keeps its id from being reused while cached.
        self._chars: dict[int, tuple[Message, int]] = {}
        self._cached_chars = 0
        self._tool_chars: dict[tuple[str, str, int], tuple[object, int]] = {}

    def __repr__(self) -> str:
        return f"TokenCounter({self.provider!r}, chars_per_token={self.chars_per_token}, scale={self.scale:.3f})"

    # -- characters -----------------------------------------------------------------------------

    def message_chars(self, message: Message) -> int:
        """The characters of a message's content (cached per message object)."""
        hit = self._chars.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        n = message.char_count()
        if len(self._chars) >= _CACHE_LIMIT or self._cached_chars >= _CACHE_CHARS:
            self._chars.clear()
            self._cached_chars = 0
        self._chars[id(message)] = (message, n)
        self._cached_chars += n
        return n

    def tool_chars(self, tool: ToolSpec) -> int:
        """The characters of one tool definition (cached: registries hand out equal specs)."""
        key = (tool.name, tool.description, id(tool.parameters))
        hit = self._tool_chars.get(key)
        if hit is not None and hit[0] is tool.parameters:
            return hit[1]
        n = len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters, default=str))
        if len(self._tool_chars) >= _CACHE_LIMIT:
            self._tool_chars.clear()
        self._tool_chars[key] = (tool.parameters, n)
        return n

    # -- raw (uncalibrated) figures -------------------------------------------------------------

    def raw_messages_from(self, chars: int, count: int) -> float:
        """Uncalibrated tokens of ``count`` messages holding ``chars`` characters in all."""
        return chars / self.chars_per_token + _MESSAGE_OVERHEAD * count

    def raw_messages(self, messages: Iterable[Message]) -> float:
        """Uncalibrated tokens of messages."""
        chars = count = 0
        for m in messages:
            chars += self.message_chars(m)
            count += 1
        return self.raw_messages_from(chars, count)

    def raw_tools(self, tools: Sequence[ToolSpec]) -> float:
        """Uncalibrated tokens of tool definitions."""
        return sum(self.tool_chars(t) for t in tools) / self.chars_per_token + _TOOL_OVERHEAD * len(tools)

    def raw_system(self, system: str | None) -> float:
        """Uncalibrated tokens of a system prompt."""
        return len(system) / self.chars_per_token + _SYSTEM_OVERHEAD if system else 0.0

    def raw_request(self, request: ModelRequest) -> float:
        """Uncalibrated input tokens of a whole request."""
        return self.raw_system(request.system) + self.raw_tools(request.tools) + self.raw_messages(request.messages)

    # -- calibrated estimates -------------------------------------------------------------------

    def tokens(self, raw: float) -> int:
        """The calibrated estimate of a raw figure."""
        return math.ceil(raw * self.scale) if raw > 0 else 0

    def text(self, text: str) -> int:
        """Estimated tokens of plain text."""
        return self.tokens(len(text) / self.chars_per_token)

    def message(self, message: Message) -> int:
        """Estimated tokens of one message."""
        return self.tokens(self.raw_messages_from(self.message_chars(message), 1))

    def messages(self, messages: Iterable[Message]) -> int:
        """Estimated tokens of messages, taken together."""
        return self.tokens(self.raw_messages(messages))

    def system(self, system: str | None) -> int:
        """Estimated tokens of a system prompt."""
        return self.tokens(self.raw_system(system))

    def tools(self, tools: Sequence[ToolSpec]) -> int:
        """Estimated tokens of tool definitions."""
        return self.tokens(self.raw_tools(tools))

    def request(self, request: ModelRequest) -> int:
        """Estimated input tokens of a request: system + tools + messages, each estimated alone
        (so the parts an assembly reports add up to this)."""
        return self.system(request.system) + self.tools(request.tools) + self.messages(request.messages)

    # -- calibration ----------------------------------------------------------------------------

    def calibrate(self, raw_estimate: float, reported: int) -> None:
        """Moves the correction factor towards ``reported / raw_estimate``.

        Args:
            raw_estimate: the uncalibrated estimate (``raw_request``) of the request that was sent.
            reported: the input tokens the provider reported for it (``reported_input_tokens``).
        """
        if reported <= 0 or raw_estimate < _MIN_CALIBRATION_TOKENS:
            return
        ratio = min(_MAX_SCALE, max(_MIN_SCALE, reported / raw_estimate))
        if self.observations == 0:
            self.scale = ratio
        else:
            self.scale += self.smoothing * (ratio - self.scale)
        self.observations += 1
