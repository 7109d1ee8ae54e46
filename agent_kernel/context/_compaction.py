"""context.compaction — Compactor: replacing older history by a model-written summary.

The model (or a cheaper ``compaction_model``) is asked, with no tools, for a summary in eight
sections; the messages before a cut are replaced by one ``SummaryBlock`` and the newest messages
are kept. The cut never separates an assistant ``tool_use`` from the user message holding its
``tool_result``, and the new history still alternates roles: when the kept part starts with a user
message, the summary block is merged into it. Failures are retried with backoff; when every
attempt fails, a sliding window keeps the newest messages that fit and a notice takes the
summary's place.

``compacted_history`` is the one function that builds the new history from a summary and the
kept messages, so a journal can rebuild exactly what the loop used from the
``compaction_complete`` event (``summary``, ``messages_removed``, ``kept_messages``, ``restored``).

With a session memory (``SessionSource``, the agent's ``memory.session``) a compaction does two
more things: when the running session-memory summary stands for exactly the messages before a
cut and those are unchanged, it is used instead of a summary call (``source`` says which was
used); and what the agent was working with (its todo list, the files it read recently, as they
are now) is restored right behind the summary, within a token budget. The restored block never
makes the history larger than it was before the compaction, nor fills the room the kept messages
leave, so a compaction is never followed by another one for its own sake.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent_kernel.context._tokens import TokenCounter
from agent_kernel.events import payloads as p
from agent_kernel.events._event import Emit, EventType
from agent_kernel.messages import Message, SummaryBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models import _pricing as pricing
from agent_kernel.models._base import MessageEnd, Model, ModelRequest, TextDelta, Usage

#: The sections every summary must have, in order.
SECTIONS: tuple[str, ...] = (
    "Task overview",
    "Key decisions",
    "Progress",
    "Blockers",
    "Open items",
    "Context",
    "Next steps",
    "Metadata",
)

SUMMARY_SYSTEM = (
    "You summarise an agent's conversation so the work can continue from your summary alone. "
    "Be faithful and specific; never invent facts."
)

_CLIP_MARK = "[... {n} chars omitted ...]"


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return text[:head] + _CLIP_MARK.format(n=len(text) - limit) + text[len(text) - tail :]


def render_transcript(messages: Sequence[Message], *, max_block_chars: int = 2_000, max_chars: int | None = None) -> str:
    """Renders messages as plain text for the summary prompt.

    Args:
        messages: the messages to render.
        max_block_chars: each text, tool input or tool result longer than this is clipped in the
            middle (long outputs matter by their start and end).
        max_chars: clips the whole transcript in the middle to this length, keeping its start
            (the task, any earlier summary) and its end (the latest work).
    """
    lines: list[str] = []
    for m in messages:
        for b in m.content:
            if isinstance(b, SummaryBlock):
                lines.append(f"[summary]\n{b.text}")
            elif isinstance(b, TextBlock):
                lines.append(f"[{m.role}]\n{_clip(b.text, max_block_chars)}")
            elif isinstance(b, ThinkingBlock):
                lines.append(f"[{m.role} thinking]\n{_clip(b.text, max_block_chars)}")
            elif isinstance(b, ToolUseBlock):
                args = json.dumps(b.input, default=str, ensure_ascii=False)
                lines.append(f"[tool call {b.name} id={b.id}]\n{_clip(args, max_block_chars)}")
            elif isinstance(b, ToolResultBlock):
                label = "tool error" if b.is_error else "tool result"
                lines.append(f"[{label} id={b.tool_use_id}]\n{_clip(b.content, max_block_chars)}")
    text = "\n\n".join(lines)
    return _clip(text, max_chars) if max_chars is not None else text


def summary_prompt(transcript: str, focus: str | None = None) -> str:
    """The user prompt asking for an eight-section summary of ``transcript``."""
    headings = "\n".join(f"## {s}" for s in SECTIONS)
    focus_line = f"\nPay particular attention to: {focus}\n" if focus else ""
    return (
        "Summarise the conversation below. Your summary will replace these messages in the "
        "context window, so the work must be able to continue from it alone.\n\n"
        f"Write exactly these eight sections, each under its Markdown heading:\n{headings}\n\n"
        "Keep file paths, names, numbers, commands and error messages verbatim. Write 'none' under "
        "a heading with nothing to report.\n"
        f"{focus_line}\n"
        f"<conversation>\n{transcript}\n</conversation>"
    )


def fallback_notice(messages_removed: int, error: str) -> str:
    """The text standing in for a summary when the summariser failed."""
    return (
        f"No summary is available because summarising failed ({error}); the {messages_removed} "
        "earlier messages were dropped and only the newest that fit the context window were kept."
    )


def is_valid_cut(messages: Sequence[Message], index: int) -> bool:
    """True if the kept part may start at ``index``: not at a tool_result whose tool_use is cut."""
    if index <= 0 or index >= len(messages):
        return index == 0
    first = messages[index]
    return not (first.role == "user" and any(isinstance(b, ToolResultBlock) for b in first.content))


def window_cut(messages: Sequence[Message], counter: TokenCounter, budget: int) -> int:
    """The earliest valid cut whose kept part fits ``budget`` tokens (the newest message is
    always kept, from the nearest valid cut before it)."""
    n = len(messages)
    best = n
    used = 0
    for i in range(n - 1, -1, -1):
        used += counter.message(messages[i])
        if is_valid_cut(messages, i):
            if used > budget and best < n:
                break
            best = i
            if used > budget:
                break
    return best if best < n else max(0, n - 1)


def summary_block(summary: str, messages_replaced: int) -> SummaryBlock:
    """The block standing in for ``messages_replaced`` messages.

    Adapters send a summary block as plain text, so its text says what it is: without that the
    model would read the summary as something the user just wrote.
    """
    lead = f"[This conversation was compacted: what follows stands in for {messages_replaced} earlier messages.]"
    return SummaryBlock(f"{lead}\n\n{summary}", messages_replaced=messages_replaced)


def with_summary(block: SummaryBlock, kept: Sequence[Message], restored: str | None = None) -> list[Message]:
    """``kept`` behind ``block`` (and the ``restored`` text right after it): merged into the first
    kept message when that is a user message, else as a user message of its own, so roles
    alternate and the history starts with a user message."""
    kept = list(kept)
    lead: tuple[Any, ...] = (block,) if restored is None else (block, TextBlock(restored))
    if kept and kept[0].role == "user":
        return [Message("user", (*lead, *kept[0].content)), *kept[1:]]
    return [Message("user", lead), *kept]


def compacted_history(summary: str, messages_replaced: int, kept: Sequence[Message], restored: str | None = None) -> list[Message]:
    """The history after compaction: the summary (see ``summary_block``), what was restored
    behind it (the todo list and recently read files), then the kept messages.

    This is the one way the loop builds it, so a journal rebuilds the same history from the
    ``compaction_complete`` event: ``summary``, ``messages_removed``, ``restored`` and the last
    ``kept_messages`` messages before the compaction.
    """
    return with_summary(summary_block(summary, messages_replaced), kept, restored)


class SessionSource(Protocol):
    """The session memory a compaction consults (``memory.session.SessionMemory``)."""

    def current(self, history: Sequence[Message], kept_budget: int, count: Callable[[Sequence[Message]], int]) -> Any:
        """The running summary (``text``, ``covered``) when usable for ``history`` now, else None."""
        ...

    def restoration(self, config: Any, count: Callable[[str], int], chars_per_token: float) -> Any:
        """What to restore behind the summary (``text``, ``files``, ``todos``), or None."""
        ...

    def compacted(self) -> None:
        """Told after every compaction: the running summary no longer matches the history."""
        ...


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """One compaction's outcome; its fields are the ``compaction_complete`` event's data."""

    history: list[Message]
    summary: str
    messages_removed: int
    kept_messages: int
    tokens_before: int
    tokens_after: int
    fallback: bool
    usage: Usage | None = None
    cost_usd: float | None = None
    source: str = "model"
    restored: Any = None  # a memory.session.Restoration, or None

    def event_data(self, *, trigger: str, model: str) -> p.CompactionComplete:
        """The ``compaction_complete`` data, with what started it and the model that summarised."""
        data = p.CompactionComplete(
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            messages_removed=self.messages_removed,
            kept_messages=self.kept_messages,
            summary=self.summary,
            fallback=self.fallback,
            usage=self.usage.to_dict() if self.usage is not None else None,
            cost_usd=self.cost_usd,
            source=self.source,
            trigger=trigger,
            model=model,
        )
        if self.restored is not None:
            data["restored"] = self.restored.text
            data["restored_files"] = list(self.restored.files)
            data["restored_todos"] = self.restored.todos
        return data

    @property
    def restored_text(self) -> str | None:
        """The restored block behind the summary, or None."""
        return None if self.restored is None else str(self.restored.text)


async def ask_for_summary(model: Model, prompt: str) -> tuple[str, Usage | None]:
    """One summary call (no tools, ``SUMMARY_SYSTEM``): the text and the call's usage.

    Raises:
        ValueError: the model answered with no text (any model error is raised as it is).
    """
    request = ModelRequest(messages=(Message.user(prompt),), system=SUMMARY_SYSTEM)
    parts: list[str] = []
    usage: Usage | None = None
    async for event in model.stream(request):
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, MessageEnd):
            usage = event.usage
    text = "".join(parts).strip()
    if not text:
        raise ValueError("the summariser returned no text")
    return text, usage


class Compactor:
    """Summarises older history with a model, with retries and a sliding-window fallback.

    Args:
        keep_messages: how many of the newest messages are kept verbatim (fewer when they alone
            would not leave room, more by one when the cut would split a tool pair).
        retry_delays: seconds to wait before each retry; one retry per entry.
        target_ratio: the share of the history budget the kept messages may use, leaving room
            for the conversation to grow before the next compaction.
        max_block_chars: per-block clipping in the summary prompt.
        sleep: the sleep function (tests may inject one that records delays).
    """

    def __init__(
        self,
        *,
        keep_messages: int = 6,
        retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
        target_ratio: float = 0.5,
        max_block_chars: int = 2_000,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if keep_messages < 1:
            raise ValueError(f"keep_messages must be at least 1, got {keep_messages}")
        if not 0.0 < target_ratio <= 1.0:
            raise ValueError(f"target_ratio must be in (0, 1], got {target_ratio}")
        self.keep_messages = keep_messages
        self.retry_delays = tuple(float(d) for d in retry_delays)
        self.target_ratio = target_ratio
        self.max_block_chars = max_block_chars
        self.sleep = sleep

    def choose_cut(self, history: Sequence[Message], counter: TokenCounter, budget: int) -> int:
        """Where the kept part starts: about ``keep_messages`` from the end, at a valid cut,
        moved later while the kept part exceeds ``target_ratio`` of ``budget``. 0 = no cut."""
        n = len(history)
        cut = max(0, n - self.keep_messages)
        while cut > 0 and not is_valid_cut(history, cut):
            cut -= 1
        target = int(budget * self.target_ratio)
        kept = counter.messages(history[cut:])
        while kept > target:
            # Move to the next valid cut, dropping the messages before it.
            j, k = cut + 1, kept - counter.message(history[cut])
            while j < n and not is_valid_cut(history, j):
                k -= counter.message(history[j])
                j += 1
            if j >= n:
                break
            cut, kept = j, k
        return cut

    def worth_compacting(self, history: Sequence[Message], cut: int) -> bool:
        """False when nothing would be removed but a single earlier summary (compacting again
        would only summarise the summary)."""
        if cut <= 0:
            return False
        return not (cut == 1 and any(isinstance(b, SummaryBlock) for b in history[0].content))

    async def summarise(self, model: Model, messages: Sequence[Message], counter: TokenCounter, focus: str | None) -> tuple[str, Usage | None]:
        """Asks ``model`` (no tools) for the summary; raises on failure or an empty answer."""
        window = int(getattr(model, "context_window", 0) or 0)
        # Leave the summariser room for its instructions and its answer.
        max_chars = int(window * 0.6 * counter.chars_per_token) if window else None
        transcript = render_transcript(messages, max_block_chars=self.max_block_chars, max_chars=max_chars)
        return await ask_for_summary(model, summary_prompt(transcript, focus))

    async def compact(
        self,
        history: Sequence[Message],
        model: Model,
        counter: TokenCounter,
        *,
        budget: int,
        measure: Callable[[Sequence[Message]], int],
        emit: Emit,
        threshold: int,
        focus: str | None = None,
        trigger: str = "auto",
        tokens_before: int | None = None,
        session: SessionSource | None = None,
        session_config: Any = None,
    ) -> CompactionResult | None:
        """Compacts ``history``; None when there is nothing worth compacting.

        Args:
            history: the stored conversation.
            model: the summariser.
            counter: estimates tokens.
            budget: tokens the history may use (the threshold less system and tools).
            measure: estimated input tokens of a request carrying a given history, as sent.
            emit: records an event.
            threshold: the auto-compaction threshold, for the ``compaction_start`` event.
            focus: what the summary should pay particular attention to.
            trigger: ``auto`` or ``manual``.
            tokens_before: the estimate that passed the threshold (``measure(history)`` if omitted).
            session: the agent's session memory: its running summary may stand in for a summary
                call, and what it restores goes behind the summary.
            session_config: the ``SessionMemoryConfig`` (budgets) for the restoration.
        """
        history = list(history)
        cut = self.choose_cut(history, counter, budget)
        running = None
        if session is not None and focus is None:  # a focused summary is asked for on purpose
            running = session.current(history, int(budget * self.target_ratio), counter.messages)
            if running is not None and self.worth_compacting(history, running.covered):
                cut = running.covered
            else:
                running = None
        if not self.worth_compacting(history, cut):
            return None
        if tokens_before is None:
            tokens_before = measure(history)
        emit(
            EventType.COMPACTION_START,
            p.CompactionStart(tokens_before=tokens_before, messages=len(history), threshold=threshold, trigger=trigger, focus=focus),
        )
        rebuild = functools.partial(
            self._rebuilt, history=history, session=session, config=session_config, counter=counter, budget=budget,
            measure=measure, tokens_before=tokens_before,
        )
        if running is not None:
            new_history, restored, tokens_after = rebuild(running.text, cut)
            result = CompactionResult(
                new_history, running.text, cut, len(history) - cut, tokens_before, tokens_after, False,
                source="session_memory", restored=restored,
            )
            emit(EventType.COMPACTION_COMPLETE, result.event_data(trigger=trigger, model=model.name))
            _compacted(session)
            return result
        error: str | None = None
        attempts = len(self.retry_delays) + 1
        for attempt in range(attempts):
            try:
                summary, usage = await self.summarise(model, history[:cut], counter, focus)
            except Exception as exc:  # any failure of the summariser falls back, never crashes the run
                error = f"{type(exc).__name__}: {exc}"
                if attempt < len(self.retry_delays):
                    delay = self.retry_delays[attempt]
                    emit(EventType.COMPACTION_RETRY, p.CompactionRetry(attempt=attempt + 1, delay_s=delay, error=error))
                    await self.sleep(delay)
                continue
            new_history, restored, tokens_after = rebuild(summary, cut)
            name = model.name
            cost = pricing.cost(name, usage) if usage is not None else None
            result = CompactionResult(
                new_history, summary, cut, len(history) - cut, tokens_before, tokens_after, False, usage, cost,
                restored=restored,
            )
            emit(EventType.COMPACTION_COMPLETE, result.event_data(trigger=trigger, model=name))
            _compacted(session)
            return result
        # Every attempt failed: keep the newest messages that fit, behind a notice.
        assert error is not None
        fallback_cut = max(cut, window_cut(history, counter, int(budget * self.target_ratio)))
        notice = fallback_notice(fallback_cut, error)
        new_history, restored, tokens_after = rebuild(notice, fallback_cut)
        emit(EventType.COMPACTION_FALLBACK, p.CompactionFallback(messages_removed=fallback_cut, tokens_after=tokens_after, error=error))
        result = CompactionResult(
            new_history, notice, fallback_cut, len(history) - fallback_cut, tokens_before, tokens_after, True,
            source="fallback", restored=restored,
        )
        emit(EventType.COMPACTION_COMPLETE, result.event_data(trigger=trigger, model=model.name))
        _compacted(session)
        return result

    def restoration_room(self, budget: int) -> int:
        """Tokens the restored block may take at most with a history ``budget``.

        The kept messages may fill ``target_ratio`` of the budget; the restored block gets at most
        70% of the rest, so the summary fits too and the next turn does not compact again.
        """
        return int(budget * (1 - self.target_ratio) * 0.7)

    def _rebuilt(
        self,
        summary: str,
        cut: int,
        *,
        history: list[Message],
        session: SessionSource | None,
        config: Any,
        counter: TokenCounter,
        budget: int,
        measure: Callable[[Sequence[Message]], int],
        tokens_before: int,
    ) -> tuple[list[Message], Any, int]:
        """The history after a compaction, what was restored in it (or None), and its estimated tokens.

        The restored block (the todo list and the files, see ``SessionSource.restoration``) gets
        the smaller of its configured budget, ``restoration_room`` and what the history may grow
        by before it is as large as it was; should it still come out larger (the estimates
        differ), it is left out.
        """
        kept = history[cut:]
        plain = compacted_history(summary, cut, kept)
        plain_tokens = measure(plain)
        if session is None or config is None:
            return plain, None, plain_tokens
        room = min(self.restoration_room(budget), tokens_before - plain_tokens)
        if room <= 0:
            return plain, None, plain_tokens
        if room < config.budget_tokens:
            config = dataclasses.replace(config, budget_tokens=room)
        restored = session.restoration(config, counter.text, counter.chars_per_token)
        if restored is None:
            return plain, None, plain_tokens
        new_history = compacted_history(summary, cut, kept, str(restored.text))
        tokens_after = measure(new_history)
        if tokens_after > tokens_before:
            return plain, None, plain_tokens
        return new_history, restored, tokens_after


def _compacted(session: SessionSource | None) -> None:
    if session is not None:
        session.compacted()
