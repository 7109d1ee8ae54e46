"""context.micro — micro-compaction: clearing old tool results in what the model sees.

Before every model call, the tool results older than the newest ``keep`` that are still whole are
replaced by a short placeholder, once clearing them saves at least ``threshold_tokens``. Clearing
happens in batches: between two batches the request only grows at its end, so the provider's
prompt cache keeps matching it, and a few small results never change the request for nothing.
It works on a copy of the messages; the stored history and the journal keep every result in full.
With a folder to spill to (the session's tool-output folder, ``ContextManager.bind_output_dir``)
a cleared result is kept there and its placeholder names the file, so the model reads it back
(``read_file``, ``grep``) instead of running the tool again. The compactor only names the files
and lists what to write (``take_spills``): the manager writes a batch off the loop's thread
before the request that names them is sent.

A conversation grows by appending, so the compactor remembers the last messages it saw and, when
the next call extends them, only looks at what is new: the cost per model call does not grow
with the length of the session. Anything else (a compacted history, another conversation) is
worked out from scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_kernel._util.spill import shown_path, spill_path, write_spill
from agent_kernel.context._tokens import TokenCounter
from agent_kernel.messages import Message, ToolResultBlock


def placeholder(chars: int, path: Path | None = None) -> str:
    """The text standing in for a cleared tool result of ``chars`` characters (kept in ``path``)."""
    if path is None:
        return f"[tool result cleared to save context: {chars} chars]"
    # Short: every cleared result of a long session carries one, in every later request.
    return f"[tool result cleared to save context: {chars} chars, kept whole in {shown_path(path)}]"


def spilled_placeholder(block: ToolResultBlock, folder: Path | None, *, write: bool = True) -> str:
    """The placeholder for ``block``, after writing its content to ``folder`` (when given).

    A file already there is kept: the cap wrote it with the whole output, of which ``block`` holds
    only a preview. A file that cannot be written leaves a placeholder that names none.
    """
    if folder is None:
        return placeholder(len(block.content))
    if not write:
        return placeholder(len(block.content), spill_path(folder, block.tool_use_id))
    try:
        return placeholder(len(block.content), write_spill(folder, block.tool_use_id, block.content, replace=False))
    except OSError:
        return placeholder(len(block.content))


@dataclass(frozen=True, slots=True)
class MicroResult:
    """What micro-compaction did to one request's messages.

    Attributes:
        messages: the messages to send (the originals when nothing was ever cleared).
        results_cleared: tool results cleared by this call (a new batch), usually 0.
        tokens_saved: estimated tokens this call's batch removed.
        tokens: estimated tokens of ``messages``.
        chars: characters of ``messages``.
        total_results_cleared: tool results shown as placeholders in ``messages``.
        total_tokens_saved: estimated tokens of the originals less those of ``messages``.
    """

    messages: tuple[Message, ...]
    results_cleared: int
    tokens_saved: int
    tokens: int
    chars: int
    total_results_cleared: int = 0
    total_tokens_saved: int = 0


class MicroCompactor:
    """Clears tool results older than the newest ``keep``, in batches that save enough tokens.

    Args:
        keep: how many of the newest tool results stay untouched.
        threshold_tokens: the least saving worth changing the request for.
        enabled: False only measures (the messages are always sent as they are).
        spill_dir: where cleared results are kept (placeholders name the file); None keeps no
            copy (the journal still has every result).
        write: False only works out the placeholders and lists nothing to write (a measuring copy).
    """

    def __init__(
        self, keep: int = 3, threshold_tokens: int = 20_000, *, enabled: bool = True, spill_dir: Path | None = None, write: bool = True
    ) -> None:
        if keep < 0:
            raise ValueError(f"keep must be 0 or more, got {keep}")
        if threshold_tokens < 0:
            raise ValueError(f"threshold_tokens must be 0 or more, got {threshold_tokens}")
        self.keep = keep
        self.threshold_tokens = threshold_tokens
        self.enabled = enabled
        self.spill_dir = spill_dir
        self.write = write
        self._spills: list[ToolResultBlock] = []  # cleared results whose files are still to be written
        self._reset(None)

    def fresh(self) -> MicroCompactor:
        """A compactor with the same settings and no memory (to measure another history); it
        writes no file."""
        return MicroCompactor(self.keep, self.threshold_tokens, enabled=self.enabled, spill_dir=self.spill_dir, write=False)

    def take_spills(self) -> list[ToolResultBlock]:
        """The cleared results whose files the placeholders already name and that are still to be
        written (``write_spill(spill_dir, block.tool_use_id, block.content, replace=False)``)."""
        spills, self._spills = self._spills, []
        return spills

    def _reset(self, counter: TokenCounter | None) -> None:
        self._counter = counter
        self._source: tuple[Message, ...] = ()
        self._out: list[Message] = []
        self._chars_in = 0  # characters of the source messages
        self._chars_out = 0  # characters of what is sent
        # One entry per tool result, oldest first: (message index, block index, chars saved by
        # clearing it; 0 when a placeholder would not be shorter).
        self._results: list[tuple[int, int, int]] = []
        self._beyond = 0  # results[:_beyond] are older than the newest `keep`
        self._applied = 0  # results[:_applied] have been cleared in _out
        self._pending = 0  # characters clearing results[_applied:_beyond] would save
        self._cleared = 0
        self._last: MicroResult | None = None
        self._scale = 1.0

    def apply(self, messages: Sequence[Message], counter: TokenCounter) -> MicroResult:
        """Returns the messages as the model should see them, with what was cleared."""
        messages = tuple(messages)
        last = self._last
        if last is not None and messages is self._source and counter is self._counter and counter.scale == self._scale:
            return last  # asked again about the same request (the loop's look-ahead, then prepare)
        seen = len(self._source)
        # Tuples compare by identity first, so checking that the history only grew is cheap.
        if counter is not self._counter or len(messages) < seen or messages[:seen] != self._source:
            self._reset(counter)
            seen = 0
        for index in range(seen, len(messages)):
            self._add(index, messages[index], counter)
        self._source = messages

        beyond = max(0, len(self._results) - self.keep)
        while self._beyond < beyond:
            self._pending += self._results[self._beyond][2]
            self._beyond += 1
        count = len(messages)
        cleared_now = saved_now = 0
        if self.enabled and self._pending and counter.tokens(self._pending / counter.chars_per_token) >= self.threshold_tokens:
            before = counter.tokens(counter.raw_messages_from(self._chars_out, count))
            cleared_now = self._clear_up_to(self._beyond)
            saved_now = before - counter.tokens(counter.raw_messages_from(self._chars_out, count))

        tokens_in = counter.tokens(counter.raw_messages_from(self._chars_in, count))
        if not self._cleared:
            result = MicroResult(messages, 0, 0, tokens_in, self._chars_in)
        else:
            tokens_out = counter.tokens(counter.raw_messages_from(self._chars_out, count))
            result = MicroResult(
                tuple(self._out), cleared_now, saved_now, tokens_out, self._chars_out, self._cleared, tokens_in - tokens_out
            )
        self._last, self._scale = result, counter.scale
        return result

    def _add(self, index: int, message: Message, counter: TokenCounter) -> None:
        chars = counter.message_chars(message)
        self._chars_in += chars
        self._chars_out += chars
        self._out.append(message)
        if message.role != "user":
            return
        for bi, block in enumerate(message.content):
            if isinstance(block, ToolResultBlock):
                path = None if self.spill_dir is None else spill_path(self.spill_dir, block.tool_use_id)
                saved = len(block.content) - len(placeholder(len(block.content), path))
                self._results.append((index, bi, max(0, saved)))

    def _clear_up_to(self, end: int) -> int:
        cleared = 0
        for mi, bi, saved in self._results[self._applied : end]:
            if saved <= 0:
                continue  # already short (or already a placeholder): nothing to save
            message = self._out[mi]
            block = message.content[bi]
            assert isinstance(block, ToolResultBlock)
            short = ToolResultBlock(block.tool_use_id, spilled_placeholder(block, self.spill_dir, write=False), block.is_error)
            if self.spill_dir is not None and self.write:
                self._spills.append(block)
            self._out[mi] = Message(message.role, (*message.content[:bi], short, *message.content[bi + 1 :]))
            self._chars_out -= len(block.content) - len(short.content)
            cleared += 1
        self._applied = max(self._applied, end)
        self._pending = 0
        self._cleared += cleared
        return cleared
