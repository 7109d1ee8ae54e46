"""jupyter.items — what a run's transcript is made of: text blocks, cards, notices, the status.

Plain dataclasses the ``Transcript`` fills in and the live view, the static transcript and the
summary read. Each has ``to_json``, the shape ``item_html.py`` draws it from (for the live view
and the static transcript alike); an item's ``agent`` is the agent that produced it (``None``
for the top-level agent).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

#: Longest tool result kept (characters); the rest is counted, not kept.
RESULT_CAP = 20_000
#: Longest pretty-printed arguments kept (characters).
ARGUMENTS_CAP = 10_000
#: Longest sub-agent task kept (characters).
PROMPT_CAP = 4_000
#: Longest start of a sub-agent's answer kept on its card (characters): the card shows a preview;
#: the whole answer is already in its text and in the result of the call that started it.
ANSWER_CAP = 1_000
#: Tool statuses after which a card no longer changes.
TERMINAL_STATUSES = frozenset({"done", "error", "rejected", "cancelled"})


@dataclass
class TextBlock:
    """A run of streamed text (``kind="text"``) or thinking (``kind="thinking"``)."""

    id: str
    kind: str
    agent: str | None
    chunks: list[str] = field(default_factory=list)
    discarded: bool = False

    @property
    def text(self) -> str:
        """The text so far (joined once and cached as a single chunk)."""
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0] if self.chunks else ""

    def to_json(self) -> dict[str, Any]:
        """The item as it is drawn."""
        return {"id": self.id, "kind": self.kind, "agent": self.agent, "text": self.text,
                "discarded": self.discarded}


@dataclass
class ToolCard:
    """One tool call, from the model naming it to its result.

    ``expires_at`` (epoch seconds) is when a pending approval stops waiting, if it has a timeout;
    ``timed_out_s`` is set when it did: the call was rejected after that many seconds (its
    timeout, or failing that the wait measured).
    """

    kind: ClassVar[str] = "tool"
    id: str
    call_id: str
    name: str
    agent: str | None
    status: str = "queued"
    arguments: str = ""
    raw_arguments: dict[str, Any] | None = None
    approval_reason: str | None = None
    decision: str | None = None
    decided_by: str | None = None
    reason: str | None = None
    progress: str | None = None
    fraction: float | None = None
    duration_s: float | None = None
    result: str | None = None
    result_chars: int = 0
    is_error: bool = False
    expires_at: float | None = None
    timed_out_s: float | None = None
    approval_timeout_s: float | None = None  # the approval's timeout, if it has one (not sent)
    images: list[dict[str, str]] = field(default_factory=list)  # {"src": data URL, "alt"}: what the result showed
    diff: str | None = None  # write_file / edit_file waiting for approval: the change, as a diff

    _WIRE = ("call_id", "name", "status", "arguments", "approval_reason", "decision", "decided_by",
             "reason", "progress", "fraction", "duration_s", "result", "result_chars", "is_error",
             "expires_at", "timed_out_s", "images", "diff")

    def to_json(self) -> dict[str, Any]:
        """The item as it is drawn (without the raw arguments dict)."""
        out: dict[str, Any] = {"id": self.id, "kind": "tool", "agent": self.agent}
        out.update((name, getattr(self, name)) for name in self._WIRE)
        return out


@dataclass
class CompactionCard:
    """One compaction of the conversation, with the summary that replaced older messages."""

    kind: ClassVar[str] = "compaction"
    id: str
    agent: str | None
    status: str = "running"
    tokens_before: int | None = None
    tokens_after: int | None = None
    messages_removed: int | None = None
    summary: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The item as it is drawn."""
        return {"id": self.id, "kind": "compaction", "agent": self.agent, "status": self.status,
                "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
                "messages_removed": self.messages_removed, "summary": self.summary}


@dataclass
class Notice:
    """A one-line notice: retry, model fallback, stall, error, cancellation."""

    kind: ClassVar[str] = "notice"
    id: str
    agent: str | None
    topic: str
    level: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """The item as it is drawn."""
        return {"id": self.id, "kind": "notice", "agent": self.agent, "topic": self.topic,
                "level": self.level, "message": self.message}


@dataclass
class SubagentCard:
    """One sub-agent run inside this one, from ``subagent_start`` to ``subagent_finish``.

    ``agent`` is the agent that started it (``None`` for the top-level agent); ``agent_id`` is
    the id its own items carry; ``task`` names the crew task it works on, if any. ``status`` is
    ``running``, ``done``, ``error`` or ``cancelled``; the outcome fields (result, usage, cost,
    counts, duration) are set when it ends, ``result`` being the start of its answer (up to
    ``ANSWER_CAP`` characters).
    """

    kind: ClassVar[str] = "subagent"
    id: str
    agent_id: str
    name: str
    agent: str | None
    parent_call_id: str | None = None
    status: str = "running"
    task: str | None = None
    prompt: str = ""
    model: str | None = None
    result: str | None = None
    reason: str | None = None
    error: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    tool_calls: int | None = None
    duration_s: float | None = None

    _WIRE = ("agent_id", "name", "parent_call_id", "status", "task", "prompt", "model", "result",
             "reason", "error", "input_tokens", "output_tokens", "cost_usd", "turns",
             "tool_calls", "duration_s")

    def to_json(self) -> dict[str, Any]:
        """The item as it is drawn."""
        out: dict[str, Any] = {"id": self.id, "kind": "subagent", "agent": self.agent}
        out.update((name, getattr(self, name)) for name in self._WIRE)
        return out


@dataclass
class UserMessage:
    """A message a person steered into the running conversation (``agent.steer``), shown where
    the run took it in: at a turn boundary, before the model call that reads it."""

    kind: ClassVar[str] = "user"
    id: str
    agent: str | None
    text: str

    def to_json(self) -> dict[str, Any]:
        """The item as it is drawn."""
        return {"id": self.id, "kind": "user", "agent": self.agent, "text": self.text}


Item = Union[TextBlock, ToolCard, CompactionCard, Notice, SubagentCard, UserMessage]


@dataclass
class RunStatus:
    """The status line: phase, turn, usage, model; ``final_text`` once the run has finished.

    ``phase`` is ``idle``, ``running``, ``finished``, ``cancelled``, ``error``, or
    ``interrupted`` (a journal that ends before its run did: the kernel died).
    ``cost_usd`` is None while unknown (no priced model call yet, or one without a price).
    ``activity`` says what the top-level agent is doing while it runs (``model``: waiting for the
    model; ``writing``; ``thinking``; ``tool_call``: the model is writing a tool call).
    Token counts are the provider's; until it reports them, front-ends estimate the call in
    flight from ``pending_input`` (the assembled context's estimate) and the characters streamed
    since ``usage_chars`` (see ``token_figures``).
    ``context_used`` of ``context_window`` tokens is how full the model's window was at the
    last call (``llm_complete.context_usage``), drawn as a meter; ``context_warned`` once a
    ``context_warning`` said it passed the warning share.
    Steering: ``pausing`` from a click on Pause until the run holds; ``paused`` while it holds at
    a turn boundary; ``queued`` counts messages sent from the view that the run has not taken in
    yet.
    """

    phase: str = "idle"
    reason: str | None = None
    turn: int = 0
    max_turns: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    model: str | None = None
    stopping: bool = False
    activity: str | None = None
    pending_input: int | None = None
    usage_chars: int = 0
    final_text: str | None = None
    paused: bool = False
    pausing: bool = False
    queued: int = 0
    context_used: int | None = None
    context_window: int | None = None
    context_warned: bool = False
    max_cost: float | None = None  # the run's spending cap in US dollars, if it has one

    _WIRE = ("phase", "reason", "turn", "max_turns", "input_tokens", "output_tokens", "cost_usd",
             "model", "stopping", "activity", "pending_input", "usage_chars", "paused", "pausing",
             "queued", "context_used", "context_window", "context_warned", "max_cost")

    def to_json(self) -> dict[str, Any]:
        """The status as the front-end sees it, less ``elapsed_s`` (the transcript adds it) and
        the final text (which travels in the text blocks)."""
        return {name: getattr(self, name) for name in self._WIRE}


def utf16_length(text: str) -> int:
    """The length of ``text`` as JavaScript counts it (UTF-16 code units), so that character
    counts made here and in the browser agree."""
    return len(text.encode("utf-16-le")) // 2


# Characters that show as nothing or change how the text around them is laid out: bidi overrides
# and isolates, zero-width characters, other format and control characters, line separators.
_HIDDEN_CATEGORIES = frozenset(("Cf", "Cc", "Zl", "Zp", "Co", "Cs"))


def visible(text: str) -> str:
    """``text`` with every character that is invisible or reorders text (a right-to-left override,
    a zero-width space, a control character) written as ``⟨U+202E⟩``: a card shows the code a
    person approves as it runs, not as a "Trojan Source" makes it read. Newlines and tabs stay."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(f"\u27e8U+{ord(c):04X}\u27e9" if c not in "\n\t" and unicodedata.category(c) in _HIDDEN_CATEGORIES else c
                   for c in text)


def pretty_arguments(arguments: Any) -> str:
    """Tool arguments as indented JSON, capped at ``ARGUMENTS_CAP`` characters, hidden characters
    made visible (``visible``)."""
    text = visible(json.dumps(arguments, indent=2, ensure_ascii=False, default=str, sort_keys=False))
    if len(text) > ARGUMENTS_CAP:
        text = text[:ARGUMENTS_CAP] + f"\n… ({len(text) - ARGUMENTS_CAP:,} more characters)"
    return text
