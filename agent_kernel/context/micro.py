"""context.micro — micro-compaction: clearing old tool results in what the model sees.

Before every model call, the content of tool results older than the newest ``keep`` is replaced
by a short placeholder, but only when that saves at least ``threshold_tokens``: clearing a few
small results would change the request (and spoil the provider's prompt cache) for nothing. It
works on a copy of the messages; the stored history and the journal keep every result in full.
Once the threshold is passed the cleared prefix only grows, so consecutive requests keep sharing
a cacheable prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..messages import Message, ToolResultBlock
from .tokens import TokenCounter

__all__ = ["MicroCompactor", "MicroResult", "placeholder"]


def placeholder(chars: int) -> str:
    """The text standing in for a cleared tool result of ``chars`` characters."""
    return f"[tool result cleared to save context: {chars} chars]"


@dataclass(frozen=True, slots=True)
class MicroResult:
    """What micro-compaction did to one request's messages.

    Attributes:
        messages: the messages to send (the originals when nothing was cleared).
        results_cleared: how many tool results were replaced by a placeholder.
        tokens_saved: estimated tokens removed from the request.
        tokens: estimated tokens of ``messages``.
    """

    messages: tuple[Message, ...]
    results_cleared: int
    tokens_saved: int
    tokens: int


class MicroCompactor:
    """Clears tool results older than the newest ``keep`` when that saves enough tokens.

    Args:
        keep: how many of the newest tool results stay untouched.
        threshold_tokens: the least saving worth changing the request for.
    """

    def __init__(self, keep: int = 3, threshold_tokens: int = 20_000) -> None:
        if keep < 0:
            raise ValueError(f"keep must be 0 or more, got {keep}")
        if threshold_tokens < 0:
            raise ValueError(f"threshold_tokens must be 0 or more, got {threshold_tokens}")
        self.keep = keep
        self.threshold_tokens = threshold_tokens

    def apply(self, messages: Sequence[Message], counter: TokenCounter) -> MicroResult:
        """Returns the messages as the model should see them, with what was cleared."""
        originals = tuple(messages)
        tokens = counter.messages(originals)
        # Walk from the newest message back, skipping the newest `keep` results.
        seen = 0
        rewritten: dict[int, Message] = {}
        cleared = 0
        for index in range(len(originals) - 1, -1, -1):
            message = originals[index]
            if message.role != "user":
                continue
            blocks = message.content
            changed = False
            new_blocks = list(blocks)
            for bi in range(len(blocks) - 1, -1, -1):
                block = blocks[bi]
                if not isinstance(block, ToolResultBlock):
                    continue
                seen += 1
                if seen <= self.keep:
                    continue
                text = placeholder(len(block.content))
                if len(block.content) <= len(text):
                    continue  # already short (or already a placeholder): nothing to save
                new_blocks[bi] = replace(block, content=text)
                changed = True
                cleared += 1
            if changed:
                rewritten[index] = Message(message.role, tuple(new_blocks))
        if not rewritten:
            return MicroResult(originals, 0, 0, tokens)
        saved = sum(counter.message(originals[i]) - counter.message(m) for i, m in rewritten.items())
        if saved < self.threshold_tokens:
            return MicroResult(originals, 0, 0, tokens)
        out = tuple(rewritten.get(i, m) for i, m in enumerate(originals))
        return MicroResult(out, cleared, saved, tokens - saved)
