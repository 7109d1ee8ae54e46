"""context.manager — ContextManager: what the loop calls before every model call.

It owns the context policy of a conversation: micro-compaction of old tool results in the
request copy, auto-compaction of the stored history when the estimated input passes the
threshold, assembly of system, tools and history within the model's window (reported as a
``context_assembled`` event), calibration of the token estimates from reported usage, and manual
compaction (``agent.compact(focus)``).

With a session memory bound (``bind_session``; every ``Agent`` binds its own) a compaction
restores the todo list and recently read files behind the summary, and, with
``SessionMemoryConfig(summary=True)``, a running summary is brought up to date between turns and
used by a compaction instead of a new summary call while it is current.

The loop's side of the contract::

    prepared = await manager.prepare(history, turn, request, model, emit)   # a task if due()
    if prepared.history is not None:      # auto-compaction rewrote the conversation
        history[:] = prepared.history     # and the turn is marked compacted
    ... stream prepared.request ...
    manager.record_usage(prepared.request, usage)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent_kernel._util.spill import write_spill
from agent_kernel.context._assembler import Component, ContextAssembler, Placed, Priority, Status
from agent_kernel.context._compaction import CompactionResult, Compactor, Emit, SessionSource, compacted_history, window_cut, with_summary
from agent_kernel.context._micro import MicroCompactor, MicroResult, spilled_placeholder
from agent_kernel.context._policy import PreparedContext
from agent_kernel.context._session_config import SessionMemoryConfig
from agent_kernel.context._tokens import TokenCounter, reported_input_tokens
from agent_kernel.errors import ContextOverflow, UserError
from agent_kernel.events import payloads as p
from agent_kernel.events._event import EventType
from agent_kernel.events._turn import TurnState
from agent_kernel.messages import Message, SummaryBlock, ToolResultBlock
from agent_kernel.models._base import Model, ModelRequest, Usage

#: Used when neither the model nor the manager says how large the window is.
DEFAULT_CONTEXT_WINDOW = 128_000


class ContextManager:
    """Keeps a conversation inside its model's context window.

    Args:
        micro_keep: tool results kept whole in what the model sees (the newest ones).
        micro_threshold_tokens: the least saving for which older results are cleared.
        threshold: auto-compaction starts when the estimated input passes this share of the window.
        reserve_tokens: instead of ``threshold``, compact when fewer than this many tokens of the
            window would be left.
        keep_messages: the newest messages kept verbatim by a compaction.
        compaction_model: a (cheaper) model that writes summaries; the run's model by default.
        retry_delays: seconds before each retry of a failed summary (one retry per entry).
        context_window: overrides the model's ``context_window``.
        auto_compact: False disables auto-compaction (manual ``compact`` still works).
        micro_compact: False disables micro-compaction.
        chars_per_token: overrides the per-provider starting ratio of the token estimate.
        calibrate: False keeps the estimates uncalibrated (reproducible figures in tests).
        target_ratio: the share of the threshold the kept messages may fill after a compaction.
        session_memory: what a compaction restores and whether a running summary is kept: a
            ``SessionMemoryConfig`` (default: restore the todo list and recently read
            files within 50,000 tokens; no running summary), True for the defaults, or False
            for neither.
        warn_threshold: a ``context_warning`` event fires when a request passes this share of
            the window (once until it falls below again); None never warns. Below ``threshold``
            it warns before auto-compaction.
        sleep: the sleep used between retries (injectable for tests).

    Example:
        >>> from agent_kernel.context import ContextManager
        >>> manager = ContextManager(threshold=0.7, keep_messages=8, retry_delays=(0.5, 1, 2))
    """

    def __init__(
        self,
        *,
        micro_keep: int = 3,
        micro_threshold_tokens: int = 20_000,
        threshold: float = 0.8,
        reserve_tokens: int | None = None,
        keep_messages: int = 6,
        compaction_model: Model | None = None,
        retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
        context_window: int | None = None,
        auto_compact: bool = True,
        micro_compact: bool = True,
        chars_per_token: float | None = None,
        calibrate: bool = True,
        target_ratio: float = 0.5,
        session_memory: Any = True,
        warn_threshold: float | None = 0.7,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise UserError(f"threshold must be a share of the context window in (0, 1], got {threshold}; e.g. threshold=0.8")
        if reserve_tokens is not None and reserve_tokens < 0:
            raise UserError(f"reserve_tokens must be 0 or more, got {reserve_tokens}; e.g. reserve_tokens=20_000")
        if warn_threshold is not None and not 0.0 < warn_threshold <= 1.0:
            raise UserError(f"warn_threshold must be a share of the context window in (0, 1] or None, got {warn_threshold}; e.g. warn_threshold=0.7")
        if context_window is not None and context_window <= 0:
            raise UserError(f"context_window must be a positive number of tokens, got {context_window}")
        if any(d < 0 for d in retry_delays):
            raise UserError(f"retry_delays must be 0 or more seconds each, got {tuple(retry_delays)}")
        try:
            self.micro = MicroCompactor(micro_keep, micro_threshold_tokens, enabled=micro_compact)
            self.compactor = Compactor(
                keep_messages=keep_messages, retry_delays=retry_delays, target_ratio=target_ratio, sleep=sleep
            )
        except ValueError as exc:
            raise UserError(f"{exc}; see help(ContextManager) for each setting") from None
        self.threshold = threshold
        self.warn_threshold = warn_threshold
        self.reserve_tokens = reserve_tokens
        self.compaction_model = compaction_model
        self.context_window = context_window
        self.auto_compact = auto_compact
        self.chars_per_token = chars_per_token
        self.calibrate = calibrate
        self._counters: dict[str, TokenCounter] = {}
        self._provider = ""
        self._fixed_tokens = 0
        self._sent: tuple[ModelRequest, float] | None = None
        self._assembler = ContextAssembler()
        self._components: dict[str, Component] = {}
        self._last_view: tuple[Sequence[Message], TokenCounter, MicroResult] | None = None
        self._pinned: dict[str, Component] = {}  # add(): pinned or retrieved text, by name
        self._placed_cache: dict[tuple[str, int], Placed] = {}
        self._last_total = 0  # estimated input of the last request prepared (context_usage, fit_extra)
        self._last_window = 0
        self._warned = False  # a context_warning stands until the share falls below warn_threshold again
        self.spill_dir: Path | None = None  # where cleared tool results are kept (bind_output_dir)
        self.session_memory = _session_config(session_memory)
        self.session: Any = None  # the SessionSource of the agent this manager serves (bind_session)

    def bind_session(self, session: SessionSource | None) -> None:
        """Serves ``session`` (an agent's ``memory.session``): what compactions restore and the running summary."""
        self.session = session

    def bind_output_dir(self, folder: Path | None) -> None:
        """Keeps the tool results micro-compaction clears in ``folder`` (the session's
        tool-output folder; the loop binds it each run), so placeholders name a file to read."""
        if folder == self.spill_dir:
            return
        self.spill_dir = folder
        self.micro = MicroCompactor(self.micro.keep, self.micro.threshold_tokens, enabled=self.micro.enabled, spill_dir=folder)
        self._last_view = None

    # -- pinned and retrieved context -----------------------------------------------------------

    def add(
        self, name: str, text: str, *, priority: int = Priority.MEDIUM, truncatable: bool = True, keep: Literal["head", "tail"] = "head"
    ) -> None:
        """Puts ``text`` into every request, within the token budget, until ``remove(name)``.

        The text goes after the system prompt, in a ``<context name="...">`` block. Each request
        is assembled by priority (system and tools are ``Priority.CRITICAL``, the conversation
        ``Priority.HIGH``): a component that does not fit is cut to the room left when
        ``truncatable``, else left out, and ``context_assembled`` says which (``components``).
        Adding a name again replaces its text.

        Args:
            name: names the text in events and in its block.
            text: the pinned or retrieved text.
            priority: a ``Priority`` or any int; higher is kept first.
            truncatable: whether it may be cut down instead of left out whole.
            keep: which end of a cut text survives (``head`` or ``tail``).

        Example:
            >>> from agent_kernel.context import ContextManager, Priority
            >>> cm = ContextManager()
            >>> cm.add("style guide", "Use British spelling.", priority=Priority.HIGH, truncatable=False)
            >>> list(cm.items)
            ['style guide']
        """
        if not isinstance(name, str) or not name.strip():
            raise UserError(f"context.add needs a non-empty name, got {name!r}; e.g. agent.context.add('docs', text)")
        if not isinstance(text, str):
            raise UserError(f"context.add({name!r}, ...) takes the text as a str, got {type(text).__name__}; pass str(value) or the text itself")
        if keep not in ("head", "tail"):
            raise UserError(f"keep={keep!r} is not understood; pass 'head' (keep the start) or 'tail' (keep the end)")
        self._pinned[name] = Component(name, text, int(priority), truncatable, None, keep)

    def remove(self, name: str) -> None:
        """Takes the text added as ``name`` out of later requests.

        Raises:
            UserError: nothing was added under ``name``.
        """
        if self._pinned.pop(name, None) is None:
            have = ", ".join(repr(n) for n in self._pinned) or "none"
            raise UserError(f"No context named {name!r} was added; added: {have}.")

    @property
    def items(self) -> dict[str, str]:
        """The pinned and retrieved texts, by name, in the order they were added."""
        return {name: c.content for name, c in self._pinned.items()}

    @property
    def components(self) -> tuple[Component, ...]:
        """The pinned and retrieved texts with their settings (priority, truncatable, keep), as added."""
        return tuple(self._pinned.values())

    def _pinned_components(self, counter: TokenCounter) -> tuple[Component, ...]:
        """The pinned texts with their size in tokens as they are sent (in their block)."""
        if not self._pinned:
            return ()
        return tuple(Component(c.name, c.content, c.priority, c.truncatable, counter.text(c.content) + _frame(counter, c.name), c.keep)
                     for c in self._pinned.values())

    def _session_for_compaction(self) -> SessionSource | None:
        return self.session if self.session is not None and self.session_memory is not None else None

    def _summary_due(self, messages: Sequence[Message], counter: TokenCounter) -> bool:
        config = self.session_memory
        if config is None or not config.summary or self.session is None:
            return False
        return bool(self.session.summary_due(messages, config, counter.messages))

    def __repr__(self) -> str:
        limit = f"reserve_tokens={self.reserve_tokens}" if self.reserve_tokens is not None else f"threshold={self.threshold}"
        return f"ContextManager({limit}, keep_messages={self.compactor.keep_messages}, micro_keep={self.micro.keep})"

    # -- sizes ----------------------------------------------------------------------------------

    def counter(self, model: Model | None = None) -> TokenCounter:
        """The token counter for ``model``'s provider (the last model seen when omitted)."""
        provider = getattr(model, "provider", "") if model is not None else self._provider
        counter = self._counters.get(provider)
        if counter is None:
            counter = self._counters[provider] = TokenCounter(provider, self.chars_per_token)
        return counter

    def window(self, model: Model) -> int:
        """The context window in tokens: this manager's setting, else the model's."""
        return self.context_window or int(getattr(model, "context_window", 0) or 0) or DEFAULT_CONTEXT_WINDOW

    def threshold_tokens(self, model: Model) -> int:
        """The estimated input above which auto-compaction starts."""
        window = self.window(model)
        if self.reserve_tokens is not None:
            if self.reserve_tokens >= window:
                raise UserError(
                    f"reserve_tokens={self.reserve_tokens} leaves no room in the {window}-token window of "
                    f"{getattr(model, 'name', 'the model')}; use a smaller reserve or threshold=0.8 instead"
                )
            return window - self.reserve_tokens
        return int(window * self.threshold)

    def estimate(self, request: ModelRequest, model: Model) -> int:
        """Estimated input tokens of ``request`` for ``model``."""
        return self.counter(model).request(request)

    def _fixed_component(self, name: str, tokens: int) -> Component:
        # System and tools rarely change size: reuse their components from call to call.
        component = self._components.get(name)
        if component is None or component.tokens != tokens:
            component = self._components[name] = Component(name, "", Priority.CRITICAL, False, tokens)
        return component

    def _view(self, messages: Sequence[Message], counter: TokenCounter) -> MicroResult:
        # The manager's own compactor follows the conversation from call to call. ``due`` and
        # ``prepare`` look at the same request one after the other: measure it once.
        last = self._last_view
        if last is not None and last[0] is messages and last[1] is counter:
            return last[2]
        result = self.micro.apply(messages, counter)
        self._last_view = (messages, counter, result)
        return result

    def _measure(self, fixed: int, counter: TokenCounter) -> Callable[[Sequence[Message]], int]:
        # Estimated input of a request carrying another history (before or after a compaction),
        # as it would be sent; a fresh compactor leaves the one following the conversation alone.
        return lambda history: fixed + self.micro.fresh().apply(history, counter).tokens

    # -- the loop's contract --------------------------------------------------------------------

    def due(self, request: ModelRequest, model: Model) -> bool:
        """True when ``prepare`` for this request will auto-compact, and so wait on a model.

        Otherwise ``prepare`` returns without suspending: the loop may await it inline and need
        not run it as a task that streams events while it waits.
        """
        if not self.auto_compact:
            return False
        counter = self.counter(model)
        fixed = counter.system(request.system) + counter.tools(request.tools)
        if self._pinned:
            fixed += sum(c.tokens or 0 for c in self._pinned_components(counter))
        if fixed < self.threshold_tokens(model) < fixed + self._view(request.messages, counter).tokens:
            return True
        return self._summary_due(request.messages, counter)  # a running-summary update calls a model too

    async def prepare(
        self, history: list[Message], turn: TurnState, request: ModelRequest, model: Model, emit: Emit
    ) -> PreparedContext:
        """Prepares one model call: micro-compaction, auto-compaction when needed, assembly.

        Args:
            history: the stored conversation (``request.messages`` is a copy of it).
            turn: the current turn.
            request: the request the loop would send.
            model: the model it goes to.
            emit: records an event (``emit(EventType, data)``).

        Returns:
            The request to send, and the new history when auto-compaction rewrote it.
        """
        self._provider = getattr(model, "provider", "")
        counter = self.counter(model)
        window = self.window(model)
        threshold = self.threshold_tokens(model)
        raw_fixed = (counter.raw_system(request.system), counter.raw_tools(request.tools))
        system_tokens, tool_tokens = counter.tokens(raw_fixed[0]), counter.tokens(raw_fixed[1])
        pinned = self._pinned_components(counter)
        fixed = system_tokens + tool_tokens + (sum(c.tokens or 0 for c in pinned) if pinned else 0)
        self._fixed_tokens = fixed
        view = self._view(request.messages, counter)
        new_history: list[Message] | None = None
        result: CompactionResult | None = None
        update: Any = None  # a running-summary update's model call
        # When system and tools alone pass the threshold, removing history cannot help: the
        # assembly event shows the overflow instead of the conversation being destroyed turn by turn.
        if self.auto_compact and fixed < threshold < fixed + view.tokens:
            result = await self.compactor.compact(
                history,
                self.compaction_model or model,
                counter,
                budget=threshold - fixed,
                measure=self._measure(fixed, counter),
                emit=emit,
                threshold=threshold,
                trigger="auto",
                tokens_before=fixed + view.tokens,
                session=self._session_for_compaction(),
                session_config=self.session_memory,
            )
            if result is not None:
                new_history = result.history
                view = self._view(_rebase(request.messages, history, result), counter)
        elif self.auto_compact and self._summary_due(history, counter):
            # Between turns, the running summary catches up, so a later compaction need not call a model.
            update = await self.session.update_summary(history, self.compaction_model or model, emit)
        if view.results_cleared:
            emit(
                EventType.MICRO_COMPACTION,
                p.MicroCompaction(
                    results_cleared=view.results_cleared,
                    tokens_saved=view.tokens_saved,
                    total_results_cleared=view.total_results_cleared,
                    total_tokens_saved=view.total_tokens_saved,
                ),
            )
        fixed_parts = (self._fixed_component("system", system_tokens), self._fixed_component("tools", tool_tokens))
        fit = self._fit(request.system, fixed_parts, pinned, view.messages, view.tokens, counter, window, threshold)
        if fit.total > window:
            # Still too large for the window (one huge result, auto-compaction off or unable to
            # help): cut the large tool results, in the stored history too, before refusing.
            stored = new_history if new_history is not None else history
            cleared = clear_tool_results(stored, emit, trigger="overflow", reason=f"the request needs about {fit.total:,} tokens of a {window:,}-token window", spill_dir=self.spill_dir)
            sent_cleared = clear_tool_results(view.messages, None, trigger="overflow", spill_dir=self.spill_dir)
            if cleared is not None:
                new_history = cleared
            if sent_cleared is not None:
                self._last_view = None
                view = self._view(sent_cleared, counter)
                fit = self._fit(request.system, fixed_parts, pinned, view.messages, view.tokens, counter, window, threshold)
        messages, trimmed = fit.messages, fit.trimmed
        spills = self.micro.take_spills()
        if spills and self.spill_dir is not None:
            # Before the request naming them is sent; off the loop's thread, so a batch of file
            # writes costs the loop nothing.
            await asyncio.to_thread(_write_spills, self.spill_dir, spills)
        assembled = p.ContextAssembled(
            budget=window,
            total_tokens=fit.total,
            components=[placed.to_dict() for placed in fit.components],
            window=window,
            threshold=threshold,
            messages=len(messages),
            messages_hidden=trimmed,
            fits=fit.total <= window,
        )
        emit(EventType.CONTEXT_ASSEMBLED, assembled)
        if fit.total > window:
            raise _overflow(fit, request, counter, window)
        self._last_total, self._last_window = fit.total, window
        self._warn(fit.total, window, threshold, emit)
        system = fit.system
        # Built directly: dataclasses.replace costs several times more on this per-call path.
        if messages is request.messages and system is request.system:
            sent = request
        else:
            sent = ModelRequest(tuple(messages), system, request.tools, request.options)
        if not trimmed and not pinned:
            # record_usage calibrates against this request's raw size: worked out now from the
            # running totals, it costs nothing however long the conversation is.
            self._sent = (sent, raw_fixed[0] + raw_fixed[1] + counter.raw_messages_from(view.chars, len(messages)))
        else:
            self._sent = None
        return PreparedContext(sent, new_history, new_history is not None, result if result is not None else update)

    def _fit(
        self,
        system: str | None,
        fixed: tuple[Component, Component],
        pinned: Sequence[Component],
        messages: Sequence[Message],
        history_tokens: int,
        counter: TokenCounter,
        window: int,
        budget: int,
    ) -> _Fit:
        """Assembles system, tools, pinned texts and history: the pinned texts by priority within
        ``budget`` (the auto-compaction threshold, so they never leave the model no room to
        answer), the history within what is left of ``window``. When the history does not fit,
        the model sees the newest messages that fit (the stored history keeps everything).

        The figures are those of what is sent: the system prompt is measured with the pinned
        blocks in it, so the parts add up to the estimate of the request itself.
        """
        if not pinned:
            # The usual case, on every model call: nothing to rank, one question (does the history
            # fit what system and tools leave?).
            system_tokens, tools_tokens = fixed[0].tokens or 0, fixed[1].tokens or 0
            room = window - system_tokens - tools_tokens
            if history_tokens <= room or len(messages) <= 1:
                status_: Status = "included" if history_tokens <= room else "truncated"
                components_ = (self._placed(fixed[0]), self._placed(fixed[1]), Placed("history", Priority.HIGH, True, status_, history_tokens, history_tokens, ""))
                return _Fit(components_, messages, 0, system_tokens + tools_tokens + history_tokens, system)
        # Each pinned text is placed by the size of its text, with the room its block's framing
        # takes set aside first: a text cut to fit then fits with its framing.
        frames = {c.name: _frame(counter, c.name) for c in pinned}
        bare = tuple(Component(c.name, c.content, c.priority, c.truncatable, (c.tokens or 0) - frames[c.name], c.keep) for c in pinned)
        history_part = Component("history", "", Priority.HIGH, True, history_tokens)
        assembly = self._assembler.assemble((*fixed, *bare, history_part), budget=budget - sum(frames.values()))
        placed_pinned = tuple(
            c if c.status == "excluded" else Placed(c.name, c.priority, c.truncatable, c.status, c.tokens + frames[c.name], c.requested_tokens + frames[c.name], c.content)
            for c in assembly.components[2:-1]
        )
        blocks = [_context_block(c.name, c.content) for c in placed_pinned if c.status != "excluded"]
        sent_system = fixed[0].tokens or 0  # the system prompt as sent, blocks included
        system_tokens = sent_system
        if blocks:
            system = "\n\n".join([system, *blocks] if system else blocks)
            sent_system = counter.system(system)
            system_tokens = max(0, sent_system - sum(c.tokens for c in placed_pinned))  # the blocks' share is theirs
        # System and tools are sent whatever their size: they count even when they do not fit.
        system_part = Placed("system", Priority.CRITICAL, False, "included", system_tokens, system_tokens, "")
        tools_tokens = fixed[1].tokens or 0
        tools_part = Placed("tools", Priority.CRITICAL, False, "included", tools_tokens, tools_tokens, "")
        parts = (system_part, tools_part, *placed_pinned)
        room = window - sent_system - tools_tokens
        trimmed = 0
        if history_tokens > room and len(messages) > 1:
            notice_room = counter.text(_hidden_notice(len(messages))) + 8
            trimmed = window_cut(messages, counter, room - notice_room)
            if trimmed > 0:
                messages = tuple(with_summary(SummaryBlock(_hidden_notice(trimmed), trimmed), messages[trimmed:]))
        requested = history_tokens
        if trimmed:
            history_tokens = counter.messages(messages)
        # The newest message is always sent, whatever its size: the history is never "excluded".
        status: Status = "truncated" if trimmed or history_tokens > room else "included"
        history = Placed("history", Priority.HIGH, True, status, history_tokens, requested, "")
        components = (*parts, history)
        return _Fit(components, messages, trimmed, sent_system + tools_tokens + history_tokens, system)

    def _placed(self, component: Component) -> Placed:
        """System or tools as placed: always sent whole (reused from call to call)."""
        key = (component.name, component.tokens or 0)
        placed = self._placed_cache.get(key)
        if placed is None:
            if len(self._placed_cache) > 64:
                self._placed_cache.clear()
            placed = self._placed_cache[key] = Placed(component.name, component.priority, False, "included", key[1], key[1], "")
        return placed

    def _warn(self, used: int, window: int, threshold: int, emit: Emit) -> None:
        warn_at = self.warn_threshold
        if warn_at is None:
            return
        share = used / window
        if share < warn_at:
            self._warned = False
            return
        if self._warned:
            return
        self._warned = True
        compact_at = threshold / window if self.auto_compact else None
        if compact_at is not None and share < compact_at:
            then = f"auto-compaction summarises the conversation at {compact_at:.0%}"
        elif compact_at is not None:
            then = "auto-compaction could not bring it lower"
        else:
            then = "auto-compaction is off: a request that does not fit is refused; call agent.compact() to make room"
        emit(
            EventType.CONTEXT_WARNING,
            p.ContextWarning(
                used_tokens=used,
                window=window,
                share=round(share, 4),
                warn_at=warn_at,
                compact_at=None if compact_at is None else round(compact_at, 4),
                message=f"The context window is {share:.0%} full ({used:,} of {window:,} tokens); {then}.",
            ),
        )

    def fit_extra(self, texts: Sequence[str], model: Model, emit: Emit) -> list[str]:
        """Places ``texts`` (what ``after_context_assembly`` hooks added) in the room the last
        prepared request left in the window; returns what is kept of each (cut or left out to
        fit), in order, and records the decision as a ``context_added`` event."""
        counter = self.counter(model)
        window = self._last_window or self.window(model)
        room = max(0, window - self._last_total)
        components = [Component(f"hook context {i + 1}", text, Priority.MEDIUM, True, counter.text(text) + 8) for i, text in enumerate(texts)]
        assembly = self._assembler.assemble(components, budget=room)
        self._last_total += assembly.total_tokens
        emit(
            EventType.CONTEXT_ADDED,
            p.ContextAdded(room=room, total_tokens=self._last_total, window=window, components=[placed.to_dict() for placed in assembly.components]),
        )
        self._sent = None  # the request sent is not the one prepared
        return [placed.content for placed in assembly.components if placed.status != "excluded"]

    def check_fits(self, request: ModelRequest, model: Model) -> None:
        """Refuses a request (one a hook replaced) that does not fit the window, before it is sent.

        Raises:
            ContextOverflow: naming its largest parts.
        """
        counter = self.counter(model)
        window = self.window(model)
        total = counter.request(request)
        self._last_total, self._last_window, self._sent = total, window, None
        if total > window:
            components = (
                Placed("system", Priority.CRITICAL, False, "included", counter.system(request.system), 0, ""),
                Placed("tools", Priority.CRITICAL, False, "included", counter.tools(request.tools), 0, ""),
            )
            raise _overflow(_Fit(components, request.messages, 0, total), request, counter, window, replaced=True)

    def context_usage(self, usage: Usage | None, model: Model) -> p.ContextUsage:
        """How full the window was for the call just made: the provider's input-token count
        (the estimate of the request when it reported none) against the window."""
        reported = reported_input_tokens(usage) if usage is not None else 0
        used = reported or self._last_total
        window = self._last_window or self.window(model)
        return p.ContextUsage(used_tokens=used, window=window, share=round(used / window, 4), estimated=not reported)

    def record_usage(self, request: ModelRequest, usage: Usage) -> None:
        """Calibrates the estimates from what the provider reported for ``request``."""
        if not self.calibrate:
            return
        counter = self.counter()
        sent = self._sent
        raw = sent[1] if sent is not None and sent[0] is request else counter.raw_request(request)
        counter.calibrate(raw, reported_input_tokens(usage))
        self._last_view = None  # measured with the old calibration

    async def compact(self, history: Sequence[Message], model: Model, emit: Emit, focus: str | None = None) -> list[Message]:
        """Compacts ``history`` now, whatever its size; returns the new history.

        Args:
            history: the stored conversation.
            model: the run's model (``compaction_model`` writes the summary when set).
            emit: records an event.
            focus: what the summary should pay particular attention to.

        Returns:
            The compacted history, or a copy of ``history`` when it is too short to compact.
        """
        result = await self._summarise(history, model, emit, trigger="manual", focus=focus)
        if result is not None:
            return result.history
        # Too short to summarise: shrinking the tool results is all that can help, and it does
        # whenever one is large (a session with one huge result must still be rescuable).
        cleared = clear_tool_results(history, emit, trigger="manual", spill_dir=self.spill_dir)
        return list(history) if cleared is None else cleared

    async def shrink(self, history: Sequence[Message], model: Model, emit: Emit, *, reason: str) -> list[Message] | None:
        """The provider refused a request as too long: one forced compaction, micro then auto.

        Every large tool result is cut to a preview (the journal keeps it whole), then the
        conversation is summarised if it is long enough. Returns the new history, or None when
        neither made anything smaller.
        """
        cleared = clear_tool_results(history, emit, trigger="overflow", reason=reason, spill_dir=self.spill_dir)
        result = await self._summarise(list(history) if cleared is None else cleared, model, emit, trigger="overflow")
        return cleared if result is None else result.history

    async def _summarise(self, history: Sequence[Message], model: Model, emit: Emit, *, trigger: str, focus: str | None = None) -> CompactionResult | None:
        """A summary compaction outside the per-turn path, within the usual budget (None: too short)."""
        counter = self.counter(model)
        threshold = self.threshold_tokens(model)
        fixed = self._fixed_tokens
        return await self.compactor.compact(
            history,
            self.compaction_model or model,
            counter,
            budget=max(0, threshold - fixed),
            measure=self._measure(fixed, counter),
            emit=emit,
            threshold=threshold,
            focus=focus,
            trigger=trigger,
            session=self._session_for_compaction(),
            session_config=self.session_memory,
        )


def _session_config(value: Any) -> Any:
    """``ContextManager(session_memory=...)`` as a ``SessionMemoryConfig``, or None for off."""
    if value is True:
        return SessionMemoryConfig()
    if value is False or value is None:
        return None
    if isinstance(value, SessionMemoryConfig):
        return value
    raise UserError(f"session_memory={value!r} is not understood; pass True, False or SessionMemoryConfig(budget_tokens=..., summary=...).")


#: Tool results longer than this are cut by a forced micro-compaction; what is kept of each.
_FORCED_CLEAR_OVER = 2_000
_FORCED_KEEP = 500


def clear_tool_results(
    history: Sequence[Message], emit: Emit | None, *, trigger: str, reason: str | None = None, spill_dir: Path | None = None
) -> list[Message] | None:
    """``history`` with every tool result over 2,000 characters cut to a preview, or None if none is.

    Unlike micro-compaction, which changes only what one request sends, this rewrites the stored
    conversation: it is for a conversation that no request can carry any more. With
    ``spill_dir`` each result is kept whole in a file the preview names; ``emit`` None records
    no event (the same cut applied to a request's copy).
    """
    out: list[Message] = []
    cleared = saved = 0
    for message in history:
        blocks = []
        for block in message.content:
            if isinstance(block, ToolResultBlock) and len(block.content) > _FORCED_CLEAR_OVER:
                kept = block.content[:_FORCED_KEEP] + "\n" + spilled_placeholder(block, spill_dir)
                saved += len(block.content) - len(kept)
                cleared += 1
                block = ToolResultBlock(block.tool_use_id, kept, block.is_error)
            blocks.append(block)
        out.append(Message(message.role, tuple(blocks)) if blocks != list(message.content) else message)
    if not cleared:
        return None
    if emit is None:
        return out
    data = p.MicroCompaction(results_cleared=cleared, tokens_saved=saved // 4, total_results_cleared=cleared, total_tokens_saved=saved // 4, trigger=trigger)
    if reason is not None:
        data["reason"] = reason
    emit(EventType.MICRO_COMPACTION, data)
    return out


def _write_spills(folder: Path, blocks: Sequence[ToolResultBlock]) -> None:
    """Keeps each cleared result in the file its placeholder names (one already there is kept:
    the cap wrote it with the whole output). A file that cannot be written is left out: the
    journal keeps every result, and the model can run the tool again."""
    for block in blocks:
        with contextlib.suppress(OSError):
            write_spill(folder, block.tool_use_id, block.content, replace=False)


@dataclass(frozen=True, slots=True)
class _Fit:
    """A request assembled within the window: each part's decision, the messages sent, how many
    were left out, and the estimated total of what is sent."""

    components: tuple[Placed, ...]
    messages: Sequence[Message]
    trimmed: int
    total: int
    system: str | None = None


def _frame(counter: TokenCounter, name: str) -> int:
    """Tokens a pinned text's block adds around it (tags, the blank line before it, rounding)."""
    return counter.text(_context_block(name, "") + "\n\n") + 2


def _context_block(name: str, text: str) -> str:
    """How a pinned or retrieved text is put in the system prompt."""
    return f'<context name="{name}">\n{text}\n</context>'


def _overflow(fit: _Fit, request: ModelRequest, counter: TokenCounter, window: int, *, replaced: bool = False) -> ContextOverflow:
    """The refusal of a request that does not fit, naming its largest parts."""
    parts: list[tuple[str, int]] = []
    for placed in fit.components:
        if placed.name == "system" and placed.tokens:
            parts.append(("the system prompt", placed.tokens))
        elif placed.name == "tools" and placed.tokens:
            parts.append((f"the {len(request.tools)} tool definitions", placed.tokens))
        elif placed.name != "history" and placed.tokens:
            parts.append((f"the context added as {placed.name!r}", placed.tokens))
    for i, sent in enumerate(fit.messages):
        parts.append((_describe(i, sent), counter.message(sent)))
    parts.sort(key=lambda part: -part[1])
    largest = parts[:3]
    named = "; ".join(f"{what} ({tokens:,} tokens)" for what, tokens in largest)
    how = "the request a before_llm_call hook returned" if replaced else "the request, even after compaction,"
    message = (
        f"Not sent: {how} needs about {fit.total:,} tokens and the model's context window holds {window:,}. "
        f"Largest parts: {named}. Shorten or remove the largest part (a shorter system prompt, fewer tools, a smaller "
        f"pasted text), or use a model with a larger window (ContextManager(context_window=...) if the model's is set too small)."
    )
    return ContextOverflow(message, tokens=fit.total, window=window, parts=largest)


def _describe(index: int, message: Message) -> str:
    results = message.tool_results
    if results:
        return f"message {index + 1} (tool results of {', '.join(b.tool_use_id for b in results[:3])})"
    return f"message {index + 1} ({message.role})"


def _hidden_notice(count: int) -> str:
    return f"[{count} earlier messages are not shown: they do not fit the context window.]"


def _rebase(sent: Sequence[Message], history: Sequence[Message], result: CompactionResult) -> Sequence[Message]:
    """The request's messages after compaction.

    Usually the request carries the history unchanged; on the last turn the loop adds an
    instruction to the request only, which must survive: the request's own messages after the cut
    are kept behind the same summary block (and the same restored block).
    """
    new_history, removed = result.history, result.messages_removed
    if len(sent) == len(history) and all(a is b for a, b in zip(sent, history)):
        return new_history
    if len(sent) < removed or any(sent[i] is not history[i] for i in range(removed)):
        return new_history  # the request does not extend the history: send what was stored
    assert isinstance(new_history[0].content[0], SummaryBlock)
    return compacted_history(result.summary, removed, sent[removed:], result.restored_text)
