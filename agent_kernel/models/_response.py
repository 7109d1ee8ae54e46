"""response — one streamed model response assembled into the assistant ``Message``.

The loop builds each response with ``ResponseBuilder``; ``journal`` rebuilds a response cut off
by a cancel or an error from its journaled deltas with the same class, so a resumed conversation
holds exactly the message the live one did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agent_kernel._util.text import encodable, encodable_data
from agent_kernel.messages import Block, Message, TextBlock, ThinkingBlock, ToolUseBlock

#: The name a tool call without one is kept under, so its error result can answer it.
NAMELESS_TOOL = "unnamed_tool"


class ResponseBuilder:
    """Assembles the assistant message from stream events, block by block, in stream order."""

    __slots__ = ("blocks", "_text", "_thinking", "_signature", "_calls", "_current", "_taken", "_suffixes")

    def __init__(self, taken: set[str] | None = None, suffixes: dict[str, int] | None = None) -> None:
        self.blocks: list[Block] = []
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._signature: str | None = None
        self._calls: dict[int, str] = {}
        self._current: set[str] = set()  # the ids of this response's calls so far
        # The call ids of the run's earlier responses; a built response adds its own.
        self._taken: set[str] = taken if taken is not None else set()
        # The last suffix given to each repeated id (shared by the run's builders), so a provider
        # that reuses one id for every call costs one lookup per call, not one per earlier call.
        self._suffixes: dict[str, int] = suffixes if suffixes is not None else {}

    @property
    def has_output(self) -> bool:
        """True once anything was said (text, thinking or a tool call)."""
        return bool(self.blocks or self._text or self._thinking)

    def _close_text(self) -> None:
        if self._text:
            self.blocks.append(TextBlock("".join(self._text)))
            self._text = []

    def _close_thinking(self) -> None:
        if self._thinking or self._signature:
            self.blocks.append(ThinkingBlock("".join(self._thinking), self._signature))
            self._thinking, self._signature = [], None

    def text(self, s: str) -> None:
        """Adds a text fragment."""
        if self._thinking or self._signature:
            self._close_thinking()
        self._text.append(s)

    def thinking(self, s: str, signature: str | None) -> None:
        """Adds a thinking fragment and, at its end, its signature."""
        self._close_text()
        if self._signature is not None and s:
            self._close_thinking()  # a signed block is complete; this is a new one
        if s:
            self._thinking.append(s)
        if signature:
            self._signature = signature

    def tool_start(self, index: int, call_id: str, name: str) -> str:
        """Notes the tool call at ``index`` and returns its id, made unique within the run.

        A provider answers each result by its call's id, so two calls with one id (a server
        that numbers calls per response, or a hostile one) would break every later request:
        a repeated id gets a suffix (``call_0`` -> ``call_0_2``), the same in the events, the
        history and the results.
        """
        taken, current = self._taken, self._current
        unique = call_id
        if unique in taken or unique in current:
            n = self._suffixes.get(call_id, 1)
            while unique in taken or unique in current:
                n += 1
                unique = f"{call_id}_{n}"
            self._suffixes[call_id] = n
        self._calls[index] = unique
        current.add(unique)
        return unique

    def call_id(self, index: int) -> str | None:
        """The id of the tool call at ``index``, once it started."""
        return self._calls.get(index)

    def tool_use(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        """Adds a completed tool call."""
        self._close_text()
        self._close_thinking()
        self.blocks.append(ToolUseBlock(call_id, name, arguments))

    def build(self) -> Message:
        """The assistant message so far (its call ids are then taken for the rest of the run)."""
        self._close_text()
        self._close_thinking()
        self._taken.update(block.id for block in self.blocks if isinstance(block, ToolUseBlock))
        return Message("assistant", tuple(self.blocks))


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """A tool call's raw JSON as a dict, and why it is not one (None when it is).

    JSON may escape a lone surrogate (``"\\ud800"``), which no tool should get and no request can
    carry: every string is made encodable (``text.encodable_data``).
    """
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {"_raw": encodable(raw)}, str(exc)
    if not isinstance(value, dict):
        return {"_raw": encodable(raw)}, f"expected a JSON object, got {type(value).__name__}"
    return encodable_data(value), None


def call_ids_in(messages: Iterable[Message]) -> set[str]:
    """The tool call ids of ``messages`` (a run's new calls are kept unique against them)."""
    return {b.id for m in messages if m.role == "assistant" for b in m.content if isinstance(b, ToolUseBlock)}
