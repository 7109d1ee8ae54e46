"""jupyter.transcript — the live picture of one run, folded from its AgentEvents.

A ``Transcript`` turns the event stream into what a person looks at (the items of ``items.py``):
blocks of streamed text and thinking, a card per tool call, compaction cards, notices, and a
status line (turn, tokens, cost, model, phase). It knows nothing about widgets or comms: the live view observes it through
``TranscriptObserver`` (to send only what changed); the static transcript (``static_view.py``)
and the summary draw its state.

Every item carries the ``agent`` that produced it (``None`` for the top-level agent), so events
of a sub-agent stay apart. A sub-agent run is itself an item, a ``SubagentCard``, whose ``agent``
is the agent that started it and whose ``agent_id`` is the one its own items carry: a front-end
nests those items inside the card, and the card under the tool card of the call that started it
(``parent_call_id``), which gives any depth of nesting and keeps concurrent sub-agents apart.
Tool cards are keyed by agent and call id, so two sub-agents whose models number their calls
alike still get a card each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeGuard, cast

from agent_kernel._util.text import shown_name, shown_text
from agent_kernel.events import payloads as p
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.jupyter._items import (
    ANSWER_CAP,
    PROMPT_CAP,
    RESULT_CAP,
    TERMINAL_STATUSES,
    CompactionCard,
    Item,
    Notice,
    RunStatus,
    SubagentCard,
    TextBlock,
    ToolCard,
    UserMessage,
    pretty_arguments,
    utf16_length,
    visible,
)

_REJECTING = frozenset({"reject", "rejected", "deny", "denied"})
_PHASE_BY_REASON = {"user_interrupt": "cancelled", "error": "error"}
#: A sub-agent's card status by how its run ended (anything else: ``done``).
_SUBAGENT_STATUS_BY_REASON = {"user_interrupt": "cancelled", "error": "error"}


class TranscriptObserver(Protocol):
    """Told about every change to a ``Transcript``, in order (the live view sends them on)."""

    def item_added(self, item: Item) -> None:
        """A new item was appended to the transcript."""

    def text_appended(self, block: TextBlock, text: str) -> None:
        """``text`` was appended to ``block``."""

    def item_changed(self, item: Item, fields: Iterable[str]) -> None:
        """``fields`` of ``item`` changed (never its text)."""

    def status_changed(self, fields: Iterable[str]) -> None:
        """``fields`` of the status changed."""


class Transcript:
    """Folds a run's AgentEvents into items and a status; see the module docstring.

    Example:
        >>> t = Transcript()
        >>> for e in events:  # doctest: +SKIP
        ...     t.apply(e)
        >>> t.status.phase  # doctest: +SKIP
        'finished'
    """

    def __init__(self, observer: TranscriptObserver | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.items: list[Item] = []
        self.status = RunStatus()
        self.prompt: str | None = None
        self.duration_s: float | None = None
        self.stats: dict[str, Any] = {}
        self._observer = observer
        self._clock = clock
        self._started: float | None = None
        self._cards: dict[tuple[str | None, str], ToolCard] = {}
        self._subagents: dict[str, SubagentCard] = {}
        self._last: dict[str | None, Item] = {}
        self._next_id = 0
        # Characters of text and thinking streamed so far (as JavaScript counts them), and
        # whether a model call reported no price (the run's cost is then unknown).
        self._streamed_chars = 0
        self._cost_unknown = False
        self._pause_notice: Notice | None = None  # the notice of the hold in progress

    # -- reading ---------------------------------------------------------------------------------

    @property
    def tool_cards(self) -> list[ToolCard]:
        """The tool cards, in the order the model made the calls."""
        return [item for item in self.items if isinstance(item, ToolCard)]

    def card(self, call_id: str, agent: str | None = None) -> ToolCard | None:
        """The card of tool call ``call_id`` made by ``agent`` (``None``: the top-level agent)."""
        return self._cards.get((agent, call_id))

    def set_diff(self, call_id: str, agent: str | None, diff: str) -> None:
        """Shows on call ``call_id``'s card the change it would make (``jupyter.write_diff``)."""
        card = self.card(call_id, agent)
        if card is not None:
            self._set(card, diff=diff)

    def cards(self, call_id: str) -> list[ToolCard]:
        """Every card of a call named ``call_id``, whichever agent made it, oldest first."""
        return [card for (_, cid), card in self._cards.items() if cid == call_id]

    def is_open(self, block: TextBlock) -> bool:
        """Whether ``block`` may still grow: it is the current block of its agent, and that
        agent's run goes on (the top-level run, or the sub-agent's when its card is known)."""
        if self._last.get(block.agent) is not block:
            return False
        card = self._subagents.get(block.agent) if block.agent is not None else None
        if card is not None:
            return card.status == "running"
        return self.status.phase in ("idle", "running")

    @property
    def subagents(self) -> list[SubagentCard]:
        """The sub-agent runs, in the order they started (nested ones included)."""
        return list(self._subagents.values())

    def subagent(self, agent_id: str) -> SubagentCard | None:
        """The card of the sub-agent whose events carry ``agent_id``, if there is one."""
        return self._subagents.get(agent_id)

    @property
    def final_text(self) -> str:
        """The answer: the run's final text, else the last top-level text block."""
        if self.status.final_text is not None:
            return self.status.final_text
        for item in reversed(self.items):
            if isinstance(item, TextBlock) and item.kind == "text" and item.agent is None \
                    and not item.discarded:
                return item.text
        return ""

    @property
    def turns(self) -> int:
        """Turns the run took: from its final stats, else the turns seen so far."""
        return int(self.stats.get("turns") or self.status.turn)

    def elapsed(self) -> float | None:
        """Seconds since the run started (the final duration once it has finished)."""
        if self.duration_s is not None:
            return self.duration_s
        return None if self._started is None else self._clock() - self._started

    def to_json(self) -> dict[str, Any]:
        """Everything needed to draw the run from scratch: its items and its status."""
        status = self.status.to_json()
        status["elapsed_s"] = self.elapsed()
        return {"items": [item.to_json() for item in self.items], "status": status}

    # -- folding ---------------------------------------------------------------------------------

    def apply(self, event: AgentEvent) -> None:
        """Folds one event in; unknown and purely internal event types are ignored."""
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event, event.data)

    def _on_run_start(self, event: AgentEvent, data: p.RunStart) -> None:
        if event.agent_id is not None:
            return
        self.prompt = data.get("prompt")
        self._started = self._clock()
        self.duration_s = None
        self._set_status(phase="running", reason=None, model=data.get("model"),
                         max_turns=data.get("max_iterations"), max_cost=data.get("max_cost"), stopping=False, final_text=None,
                         paused=False, pausing=False, queued=0)

    def _on_iteration_start(self, event: AgentEvent, data: p.IterationStart) -> None:
        self._last.pop(event.agent_id, None)  # text of a new turn starts a new block
        if event.agent_id is not None:
            return
        turn_state = data.get("turn_state") or {}
        counter = turn_state.get("turn_counter", event.iteration)
        self._set_status(turn=int(counter) + 1,
                         max_turns=turn_state.get("max_iterations", self.status.max_turns))

    def _on_text(self, event: AgentEvent, data: p.TextDelta | p.ThinkingDelta) -> None:
        text = data.get("text") or ""
        if not text:
            return
        kind = "thinking" if event.type is EventType.THINKING_DELTA else "text"
        self._streamed_chars += utf16_length(text)
        if event.agent_id is None:
            self._set_status(activity="thinking" if kind == "thinking" else "writing")
        last = self._last.get(event.agent_id)
        if isinstance(last, TextBlock) and last.kind == kind:
            last.chunks.append(text)
            if self._observer is not None:
                self._observer.text_appended(last, text)
            return
        self._add(TextBlock(self._new_id(), kind, event.agent_id, [text]))

    def _on_tool_call_start(self, event: AgentEvent, data: p.ToolCallStart) -> None:
        self._tool_card(event, data.get("call_id", ""), data.get("name"))
        if event.agent_id is None:
            self._set_status(activity="tool_call")

    def _on_llm_start(self, event: AgentEvent, data: p.LlmStart) -> None:
        if event.agent_id is None:
            self._set_status(activity="model")

    def _on_context_assembled(self, event: AgentEvent, data: p.ContextAssembled) -> None:
        total = data.get("total_tokens")
        if event.agent_id is None and isinstance(total, int):
            self._set_status(pending_input=total)

    def _on_tool_call_ready(self, event: AgentEvent, data: p.ToolCallReady) -> None:
        card = self._tool_card(event, data.get("call_id", ""), data.get("name"))
        arguments = data.get("arguments")
        card.raw_arguments = arguments if isinstance(arguments, dict) else None
        self._set(card, arguments=pretty_arguments(arguments if arguments is not None else {}))

    def _on_approval_required(self, event: AgentEvent, data: p.ApprovalRequired) -> None:
        card = self._tool_card(event, data.get("call_id", ""), data.get("tool"))
        reason = data.get("reason")
        if data.get("server") and data.get("destructive"):  # an MCP tool's destructiveHint
            reason = f"{reason} · the MCP server {shown_name(str(data['server']))!r} marks this tool destructive"
        reason = shown_text(reason) if isinstance(reason, str) else reason
        preview = data.get("preview")
        if isinstance(preview, str) and preview:  # what the call would change (a cell's new source, a diff)
            reason = f"{reason}\n\n{preview}"
        # Approvals may carry a deadline; older journals and gates without one omit the keys.
        expires, timeout = data.get("expires_at"), data.get("timeout_s")
        card.approval_timeout_s = float(timeout) if _is_number(timeout) else None
        changes: dict[str, Any] = {
            "status": "awaiting_approval", "approval_reason": visible(reason) if isinstance(reason, str) else reason,
            "expires_at": float(expires) if _is_number(expires) else None,
        }
        if not card.arguments and data.get("arguments") is not None:
            card.raw_arguments = data["arguments"] if isinstance(data["arguments"], dict) else None
            changes["arguments"] = pretty_arguments(data["arguments"])
        self._set(card, **changes)

    def _on_approval_decision(self, event: AgentEvent, data: p.ApprovalDecision) -> None:
        card = self._tool_card(event, data.get("call_id", ""), None)
        decision = str(data.get("decision") or "")
        rejected = decision.lower() in _REJECTING
        status = "rejected" if rejected else ("queued" if card.status == "awaiting_approval"
                                               else card.status)
        changes: dict[str, Any] = {"status": status, "decision": decision,
                                   "decided_by": data.get("decided_by"), "reason": data.get("reason")}
        if data.get("decided_by") == "timeout":  # said as the timeout set, else as the wait measured
            waited = data.get("wait_s")
            changes["timed_out_s"] = card.approval_timeout_s if card.approval_timeout_s is not None \
                else float(waited) if _is_number(waited) else 0.0
        self._set(card, **changes)

    def _on_tool_start(self, event: AgentEvent, data: p.ToolStart) -> None:
        card = self._tool_card(event, data.get("call_id", ""), data.get("name"))
        if card.status not in TERMINAL_STATUSES:
            self._set(card, status="running")

    def _on_tool_progress(self, event: AgentEvent, data: p.ToolProgress) -> None:
        card = self._tool_card(event, data.get("call_id", ""), None)
        self._set(card, progress=data.get("message"), fraction=data.get("fraction"))

    def _on_tool_result(self, event: AgentEvent, data: p.ToolResult) -> None:
        card = self._tool_card(event, data.get("call_id", ""), data.get("name"))
        content = data.get("content")
        content = content if isinstance(content, str) else json.dumps(content, default=str)
        is_error = bool(data.get("is_error"))
        status = card.status if card.status in ("rejected", "cancelled") else \
            ("error" if is_error else "done")
        changes: dict[str, Any] = {}
        images = data.get("images")
        if isinstance(images, list) and images:  # the pictures the model got (a plot), shown on the card
            changes["images"] = [{"src": f"data:{i.get('media_type')};base64,{i.get('data')}", "alt": str(i.get("alt", ""))}
                                 for i in images[:4] if isinstance(i, dict) and str(i.get("media_type", "")).startswith("image/")]
        self._set(card, status=status, is_error=is_error, result=content[:RESULT_CAP],
                  result_chars=len(content), duration_s=data.get("duration_s"), progress=None, **changes)

    def _on_llm_complete(self, event: AgentEvent, data: p.LlmComplete) -> None:
        top = event.agent_id is None
        extra: dict[str, Any] = {"usage_chars": self._streamed_chars}
        if top:  # the provider's figures replace the estimate of the call in flight
            extra.update(pending_input=None, activity=None)
            figure = data.get("context_usage")
            if isinstance(figure, dict) and isinstance(figure.get("window"), int) and figure["window"] > 0:
                extra.update(context_used=int(figure.get("used_tokens") or 0), context_window=figure["window"])
        self._add_usage(data, model=data.get("model") if top else None, **extra)

    def _on_context_warning(self, event: AgentEvent, data: p.ContextWarning) -> None:
        if event.agent_id is None:
            self._set_status(context_warned=True)
        self._notice(event, "context_warning", "warning", str(data.get("message") or "The context window is filling up."))

    def _add_usage(self, data: p.LlmComplete | p.CompactionComplete | p.McpSampling, model: str | None = None, **extra: Any) -> None:
        """Adds one model call's tokens and cost (a response, a compaction summary, or a completion
        an MCP server asked for) to the status."""
        usage: Mapping[str, Any] = data.get("usage") or {}
        cost = data.get("cost_usd")
        if cost is None:
            self._cost_unknown = True  # one unpriced call makes the total unknown
        total = None if cost is None or self._cost_unknown \
            else (self.status.cost_usd or 0.0) + float(cost)
        changes: dict[str, Any] = {
            "input_tokens": self.status.input_tokens + int(usage.get("input_tokens") or 0),
            "output_tokens": self.status.output_tokens + int(usage.get("output_tokens") or 0),
            "cost_usd": total, **extra,
        }
        if model:
            changes["model"] = model
        self._set_status(**changes)

    def _on_retry(self, event: AgentEvent, data: p.Retry) -> None:
        message = f"Retrying (attempt {data.get('attempt', '?')})"
        if data.get("delay_s") is not None:
            message += f" in {float(data['delay_s']):.1f} s"
        if data.get("error"):
            message += f" after: {data['error']}"
        if self._discard_partial(event, data):
            message += ". The partial output above was discarded."
        self._notice(event, "retry", "warning", message)

    def _on_model_fallback(self, event: AgentEvent, data: p.ModelFallback) -> None:
        message = f"Switched model from {data.get('from_model')} to {data.get('to_model')}"
        if data.get("reason"):
            message += f": {data['reason']}"
        if self._discard_partial(event, data):
            message += ". The partial output above was discarded."
        self._notice(event, "model_fallback", "warning", message)
        if event.agent_id is None and data.get("to_model"):
            self._set_status(model=data["to_model"])

    def _discard_partial(self, event: AgentEvent, data: p.Retry | p.ModelFallback) -> bool:
        """After a failed model call: the next text starts a new block; a partial response's
        text is struck through and its unfinished tool calls are cancelled. True if partial."""
        last = self._last.pop(event.agent_id, None)
        if not data.get("partial"):
            return False
        if isinstance(last, TextBlock) and not last.discarded:
            self._set(last, discarded=True)
        for card in self.tool_cards:
            if card.agent == event.agent_id and card.status not in TERMINAL_STATUSES:
                self._set(card, status="cancelled")
        return True

    def _on_stall(self, event: AgentEvent, data: p.StallDetected) -> None:
        message = f"No output from the model for {float(data.get('seconds') or 0):.0f} s"
        if data.get("action"):
            message += f"; {data['action']}"
        self._notice(event, "stall_detected", "warning", message)

    def _on_compaction_start(self, event: AgentEvent, data: p.CompactionStart) -> None:
        self._add(CompactionCard(self._new_id(), event.agent_id,
                                 tokens_before=data.get("tokens_before")))

    def _on_compaction_complete(self, event: AgentEvent, data: p.CompactionComplete) -> None:
        card = next((item for item in reversed(self.items) if isinstance(item, CompactionCard)
                     and item.agent == event.agent_id and item.status == "running"), None)
        if card is None:
            card = CompactionCard(self._new_id(), event.agent_id)
            self._add(card)
        self._set(card, status="done",
                  tokens_before=data.get("tokens_before", card.tokens_before),
                  tokens_after=data.get("tokens_after"),
                  messages_removed=data.get("messages_removed"), summary=data.get("summary"))
        if data.get("usage"):  # the summary was a model call: it counts like one
            self._add_usage(data)

    def _on_compaction_fallback(self, event: AgentEvent, data: p.CompactionFallback) -> None:
        reason = data.get("reason") or data.get("error")  # ``reason``: journals of older versions
        message = "Summarising failed; older messages were dropped instead"
        self._notice(event, "compaction_fallback", "warning",
                     message + (f": {reason}" if reason else ""))

    def _on_max_iterations(self, event: AgentEvent, data: p.MaxIterationsReached) -> None:
        self._notice(event, "max_iterations_reached", "warning",
                     "Reached the turn limit; the last answer was given without tools")

    def _on_error(self, event: AgentEvent, data: p.Error) -> None:
        kind = data.get("kind")
        message = str(data.get("message") or "error")
        self._notice(event, "error", "error", f"{kind}: {message}" if kind else message)

    def _on_cancelled(self, event: AgentEvent, data: p.Cancelled) -> None:
        reason = data.get("reason")
        self._notice(event, "cancelled", "warning", f"Cancelled: {reason}" if reason else "Cancelled")
        if event.agent_id is None:
            self._set_status(phase="cancelled", stopping=False)

    def _on_steer(self, event: AgentEvent, data: p.Steer) -> None:
        self._add(UserMessage(self._new_id(), event.agent_id, str(data.get("text") or "")))
        if event.agent_id is None and self.status.queued:
            self._set_status(queued=self.status.queued - 1)

    def _on_subagent_report(self, event: AgentEvent, data: p.SubagentReport) -> None:
        """A background sub-agent's answer reached the model: shown where the model read it."""
        self._notice(event, "subagent_report", "info",
                     f"Background sub-agent {data.get('name')!r} reported back ({data.get('reason')}); the model reads its answer next.")

    def _on_session_memory_update(self, event: AgentEvent, data: p.SessionMemoryUpdate) -> None:
        """A session-memory summary call: a model call of the run, counted and shown as one."""
        if data.get("usage"):
            self._add_usage(cast(p.LlmComplete, data))
        where = " beside the run" if data.get("background") else ""
        if data.get("error"):
            self._notice(event, "session_memory", "warning", f"Session-memory summary update failed{where}: {data.get('error')}")
            return
        usage: Mapping[str, Any] = data.get("usage") or {}
        cost = data.get("cost_usd")
        spent = f"{int(usage.get('input_tokens') or 0):,} tokens in, {int(usage.get('output_tokens') or 0):,} out" + (f", ${cost:.4f}" if cost is not None else "")
        self._notice(event, "session_memory", "info",
                     f"Session memory updated{where} ({data.get('messages_added')} messages summarised by {data.get('model')}: {spent})")

    def _on_plan_mode(self, event: AgentEvent, data: p.PlanMode) -> None:
        if data.get("active"):
            self._notice(event, "plan_mode", "info", "Plan mode: only read-only tools run; other calls are refused and the model is told why.")
        else:
            self._notice(event, "plan_mode", "info", f"Plan mode left: the agent runs in {data.get('mode')!r} mode.")

    def _on_paused(self, event: AgentEvent, data: p.Paused) -> None:
        waiting = data.get("steers")
        message = "Paused at the turn boundary"
        if isinstance(waiting, int) and waiting > 0:
            message += f" ({waiting} steered message{'' if waiting == 1 else 's'} waiting)"
        self._pause_notice = Notice(self._new_id(), event.agent_id, "paused", "info", message)
        self._add(self._pause_notice)
        if event.agent_id is None:
            self._set_status(paused=True, pausing=False)

    def _on_resumed(self, event: AgentEvent, data: p.Resumed) -> None:
        held = data.get("paused_s")
        notice, self._pause_notice = self._pause_notice, None
        if notice is not None:
            after = f"for {float(held):.1f} s " if _is_number(held) else ""
            self._set(notice, message=f"Paused {after}at the turn boundary, then resumed")
        if event.agent_id is None:
            self._set_status(paused=False, pausing=False)

    def _on_mcp(self, event: AgentEvent, data: dict[str, Any]) -> None:
        """A resource attached to the prompt, or a server's question or sampling request, answered."""
        server = data.get("server")
        if event.type is EventType.MCP_RESOURCE:
            capped = ", capped" if data.get("capped") else ""
            message = f"Attached @{server}:{data.get('uri')} ({int(data.get('chars') or 0):,} characters{capped})"
        elif event.type is EventType.MCP_SAMPLING:
            if data.get("action") == "accept":
                self._add_usage(cast(p.McpSampling, data))  # the run's tokens and cost, as its own model calls
                out = int((data.get("usage") or {}).get("output_tokens") or 0)
                message = (f"MCP server {server!r} asked the model ({data.get('model')}) for a completion: answered, "
                           f"{out:,} token{'' if out == 1 else 's'} out")
            else:
                message = f"MCP server {server!r} asked the model for a completion: declined ({data.get('reason')})"
        else:
            answer = data.get("action")
            message = f"MCP server {server!r} asked: {data.get('message')} → {answer}"
            if answer != "accept" and data.get("reason"):
                message += f" ({data['reason']})"
        self._notice(event, event.type.value, "info", message)

    def _on_mcp_warning(self, event: AgentEvent, data: p.McpWarning) -> None:
        """A server's tool left out (its schema is malformed, say): the person sees which and why."""
        self._notice(event, "mcp_warning", "warning",
                     f"MCP server {data.get('server')!r}: skipped tool {data.get('tool')!r}: {data.get('message')}")

    # Memory steps the person may want to see: what the agent was told, what it stored, its plan.

    def _on_memory_loaded(self, event: AgentEvent, data: p.MemoryLoaded) -> None:
        entries = int(data.get("entries") or 0)
        read = [f"{entries} memor{'y' if entries == 1 else 'ies'}"] if entries else []
        if data.get("agents_md"):
            read.append("AGENTS.md")
        if read:
            self._notice(event, "memory_loaded", "info", f"Read {' and '.join(read)} into the system prompt")

    def _on_memory_write_complete(self, event: AgentEvent, data: p.MemoryWriteComplete) -> None:
        key, op = data.get("key"), data.get("op")
        verb = "Forgot" if op == "forget" else ("Updated the memory" if data.get("existed") else "Remembered")
        self._notice(event, "memory", "info", f"{verb} {key!r} (long-term memory: {int(data.get('entries') or 0)} held)")

    def _on_memory_warning(self, event: AgentEvent, data: p.MemoryWarning) -> None:
        self._notice(event, "memory_warning", "warning", str(data.get("message") or "The memory file could not be read."))

    def _on_todo_update(self, event: AgentEvent, data: p.TodoUpdate) -> None:
        todos = data.get("todos") or []
        lines = "; ".join(f"{'✓' if t.get('status') == 'completed' else '…' if t.get('status') == 'in_progress' else '○'} "
                          f"{t.get('content', '')}" for t in todos[:8])
        more = f"; and {len(todos) - 8} more" if len(todos) > 8 else ""
        self._notice(event, "todo", "info", f"Plan ({int(data.get('completed') or 0)}/{len(todos)} done): {lines}{more}")

    def _on_system_reminder(self, event: AgentEvent, data: p.SystemReminder) -> None:
        told = []
        variables, files = data.get("variables") or [], data.get("files") or []
        if variables:
            told.append(f"{len(variables)} variable{'' if len(variables) == 1 else 's'} changed")
        if files:
            told.append(f"{len(files)} file{'' if len(files) == 1 else 's'} changed on disk")
        if told:
            self._notice(event, "reminder", "info", f"Told the agent: {', '.join(told)}")

    def _on_subagent_start(self, event: AgentEvent, data: p.SubagentStart) -> None:
        if data.get("continues"):
            # A run resumed after its process died picks this sub-agent up: what its model was
            # still writing then never completed (it is asked again), as after a failed call.
            last = self._last.pop(event.agent_id, None)
            if isinstance(last, TextBlock) and not last.discarded:
                self._set(last, discarded=True)
        card = self._subagent_card(event, data)
        prompt = str(data.get("prompt") or "")
        if len(prompt) > PROMPT_CAP:
            prompt = prompt[:PROMPT_CAP] + f"… ({len(prompt) - PROMPT_CAP:,} more characters)"
        task = data.get("task")
        self._set(card, prompt=prompt, model=data.get("model") or card.model,
                  task=task if isinstance(task, str) else None)

    def _on_subagent_finish(self, event: AgentEvent, data: p.SubagentFinish) -> None:
        card = self._subagent_card(event, data)
        for tool in self.tool_cards:  # its calls still open when it stopped were cut off
            if tool.agent == card.agent_id and tool.status not in TERMINAL_STATUSES:
                self._set(tool, status="cancelled")
        reason = data.get("reason")
        usage = data.get("usage") or {}
        text = data.get("text")
        self._set(card, status=_SUBAGENT_STATUS_BY_REASON.get(str(reason), "done"),
                  reason=reason, error=data.get("error"),
                  result=text[:ANSWER_CAP] if isinstance(text, str) else None,
                  input_tokens=usage.get("input_tokens"),
                  output_tokens=usage.get("output_tokens"), cost_usd=data.get("cost_usd"),
                  turns=data.get("turns"), tool_calls=data.get("tool_calls"),
                  duration_s=data.get("duration_s"))

    def _subagent_card(self, event: AgentEvent, data: p.SubagentStart | p.SubagentFinish) -> SubagentCard:
        """The card of the sub-agent ``event`` is about, made on first sight."""
        agent_id = str(data.get("agent_id") or event.agent_id or "")
        card = self._subagents.get(agent_id)
        if card is not None:
            return card
        parent = data.get("parent_agent_id")
        call_id = data.get("parent_call_id")
        card = SubagentCard(self._new_id(), agent_id, shown_name(str(data.get("name") or agent_id)),
                            parent if isinstance(parent, str) else None,
                            parent_call_id=call_id if isinstance(call_id, str) else None)
        self._subagents[agent_id] = card
        # Under the card of the call that started it, the card does not end the parent's
        # current text block; standing on its own in the parent's items, it does.
        before = self._last.get(card.agent)
        self._add(card)
        if card.parent_call_id is not None and self.card(card.parent_call_id, card.agent):
            if before is None:
                self._last.pop(card.agent, None)
            else:
                self._last[card.agent] = before
        return card

    def _on_run_finish(self, event: AgentEvent, data: p.RunFinish) -> None:
        if event.agent_id is not None:
            return
        reason = data.get("reason")
        stats = data.get("stats") or {}
        self._cancel_open_items()
        changes: dict[str, Any] = {
            "phase": _PHASE_BY_REASON.get(str(reason), "finished"),
            "reason": reason, "stopping": False, "final_text": data.get("text"),
            "activity": None, "paused": False, "pausing": False, "queued": 0,
        }
        for key in ("input_tokens", "output_tokens", "cost_usd"):
            if key in stats:
                changes[key] = stats[key]
        self.stats = dict(stats)
        self.duration_s = stats.get("duration")
        if self.duration_s is None and self._started is not None:
            self.duration_s = self._clock() - self._started
        self._set_status(**changes)

    def _cancel_open_items(self) -> None:
        """The run is over: tool calls and sub-agents still open will not finish."""
        for card in self.tool_cards:
            if card.status not in TERMINAL_STATUSES:
                self._set(card, status="cancelled")
        for sub in self._subagents.values():
            if sub.status == "running":
                self._set(sub, status="cancelled")

    # -- changes ---------------------------------------------------------------------------------

    def mark_stopping(self, stopping: bool = True) -> None:
        """Shows that a stop was asked for (until the run ends), or that it failed (False)."""
        if self.status.phase == "running":
            self._set_status(stopping=stopping)

    def mark_interrupted(self, duration_s: float | None = None) -> None:
        """Ends a run whose events stop before its ``run_finish`` (a journal of a kernel that
        died): its phase becomes ``interrupted`` and whatever was still open is cancelled."""
        if self.status.phase != "running":
            return
        self._cancel_open_items()
        self.duration_s = duration_s
        self._set_status(phase="interrupted", reason="interrupted", stopping=False, activity=None,
                         paused=False, pausing=False, queued=0)

    def mark_pausing(self, pausing: bool = True) -> None:
        """Shows that a pause was asked for (until the run holds), or that it was called off."""
        if self.status.phase == "running":
            self._set_status(pausing=pausing and not self.status.paused)

    def mark_queued(self, count: int = 1) -> None:
        """Counts ``count`` more (or, negative, fewer) steered messages waiting for the next turn
        boundary."""
        if self.status.phase == "running":
            self._set_status(queued=max(0, self.status.queued + count))

    def add_notice(self, topic: str, level: str, message: str) -> None:
        """Appends a notice that no event carries (e.g. a click that could not be delivered)."""
        self._add(Notice(self._new_id(), None, topic, level, message))

    def _notice(self, event: AgentEvent, topic: str, level: str, message: str) -> None:
        # Notices quote servers' words (a skipped tool's name, an error): shown as what they are.
        self._add(Notice(self._new_id(), event.agent_id, topic, level, shown_text(message) if isinstance(message, str) else message))

    def _tool_card(self, event: AgentEvent, call_id: str, name: str | None) -> ToolCard:
        # A name from a model or an MCP server is hostile input: controls and bidi shown as text.
        name = shown_name(name) if isinstance(name, str) else name
        card = self._cards.get((event.agent_id, call_id))
        if card is None:
            card = ToolCard(self._new_id(), call_id, name or "tool", event.agent_id)
            self._cards[(event.agent_id, call_id)] = card
            self._add(card)
        elif name and card.name != name:
            self._set(card, name=name)
        return card

    def _new_id(self) -> str:
        self._next_id += 1
        return f"i{self._next_id}"

    def _add(self, item: Item) -> None:
        self.items.append(item)
        self._last[item.agent] = item
        if self._observer is not None:
            self._observer.item_added(item)

    def _set(self, item: Item, **changes: Any) -> None:
        changed = [name for name, value in changes.items() if getattr(item, name) != value]
        for name in changed:
            setattr(item, name, changes[name])
        if changed and self._observer is not None:
            self._observer.item_changed(item, changed)

    def _set_status(self, **changes: Any) -> None:
        changed = [name for name, value in changes.items()
                   if getattr(self.status, name) != value]
        for name in changed:
            setattr(self.status, name, changes[name])
        if changed and self._observer is not None:
            self._observer.status_changed(changed)


# Each handler declares the payload it reads (``agent_kernel.events.payloads``); ``apply`` passes ``event.data``.
_Handler = Callable[[Transcript, AgentEvent, Any], None]
_HANDLERS: dict[EventType, _Handler] = {
    EventType.RUN_START: Transcript._on_run_start,
    EventType.ITERATION_START: Transcript._on_iteration_start,
    EventType.TEXT_DELTA: Transcript._on_text,
    EventType.THINKING_DELTA: Transcript._on_text,
    EventType.TOOL_CALL_START: Transcript._on_tool_call_start,
    EventType.TOOL_CALL_READY: Transcript._on_tool_call_ready,
    EventType.APPROVAL_REQUIRED: Transcript._on_approval_required,
    EventType.APPROVAL_DECISION: Transcript._on_approval_decision,
    EventType.TOOL_START: Transcript._on_tool_start,
    EventType.TOOL_PROGRESS: Transcript._on_tool_progress,
    EventType.TOOL_RESULT: Transcript._on_tool_result,
    EventType.LLM_START: Transcript._on_llm_start,
    EventType.CONTEXT_ASSEMBLED: Transcript._on_context_assembled,
    EventType.LLM_COMPLETE: Transcript._on_llm_complete,
    EventType.CONTEXT_WARNING: Transcript._on_context_warning,
    EventType.RETRY: Transcript._on_retry,
    EventType.MODEL_FALLBACK: Transcript._on_model_fallback,
    EventType.STALL_DETECTED: Transcript._on_stall,
    EventType.COMPACTION_START: Transcript._on_compaction_start,
    EventType.COMPACTION_COMPLETE: Transcript._on_compaction_complete,
    EventType.COMPACTION_FALLBACK: Transcript._on_compaction_fallback,
    EventType.MAX_ITERATIONS_REACHED: Transcript._on_max_iterations,
    EventType.ERROR: Transcript._on_error,
    EventType.CANCELLED: Transcript._on_cancelled,
    EventType.SUBAGENT_START: Transcript._on_subagent_start,
    EventType.SUBAGENT_FINISH: Transcript._on_subagent_finish,
    EventType.RUN_FINISH: Transcript._on_run_finish,
    EventType.MCP_RESOURCE: Transcript._on_mcp,
    EventType.MCP_WARNING: Transcript._on_mcp_warning,
    EventType.MEMORY_LOADED: Transcript._on_memory_loaded,
    EventType.MEMORY_WRITE_COMPLETE: Transcript._on_memory_write_complete,
    EventType.MEMORY_WARNING: Transcript._on_memory_warning,
    EventType.TODO_UPDATE: Transcript._on_todo_update,
    EventType.SYSTEM_REMINDER: Transcript._on_system_reminder,
    EventType.MCP_SAMPLING: Transcript._on_mcp,
    EventType.MCP_ELICITATION: Transcript._on_mcp,
    EventType.STEER: Transcript._on_steer,
    EventType.SUBAGENT_REPORT: Transcript._on_subagent_report,
    EventType.SESSION_MEMORY_UPDATE: Transcript._on_session_memory_update,
    EventType.PLAN_MODE: Transcript._on_plan_mode,
    EventType.PAUSED: Transcript._on_paused,
    EventType.RESUMED: Transcript._on_resumed,
}


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
