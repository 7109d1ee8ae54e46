"""jupyter.static_view — the lasting transcript of a run: static HTML drawn from the view model.

When a run ends, the cell's live view is replaced by this transcript, so a saved notebook shows
what the person saw, once, with no widget state and no kernel: in JupyterLab after a restart,
nbconvert, GitHub, VS Code and Colab. It is drawn from the same view model the live view shows
(``Transcript.to_json()``: the items and the status): each item by ``item_html.item_html``, the
very HTML the live view is sent, nested as the live view nests it; the status line label for
label as ``widgets/agent_view.js`` says it (a browser test compares their text).

Styles are inline (``style`` attributes using JupyterLab's theme variables with fallbacks), since
exported and saved outputs carry no stylesheet and some renderers drop ``<style>``; there is no
script. ``text/plain`` is the run's ``RunSummary.text``: deterministic for a deterministic run,
so notebook checkers such as nbval can compare it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_kernel.events._event import AgentEvent
from agent_kernel.jupyter._item_html import (
    BORDER,
    COLORS,
    FG,
    MUTED_COLOR,
    S_ITEMS,
    S_MUTED,
    esc,
    format_int,
    format_seconds,
    item_html,
)
from agent_kernel.jupyter._items import utf16_length
from agent_kernel.jupyter._summary import RunSummary, format_cost
from agent_kernel.jupyter._transcript import Transcript

# -- the status line's labels (the live view's, widgets/agent_view.js, say the same) ------------

PHASE_LABELS = {"idle": "waiting to start", "running": "running", "finished": "finished",
                "cancelled": "cancelled", "error": "error",
                "interrupted": "interrupted (the journal ends here)"}
PAUSED_LABEL = "paused — waiting at the turn boundary"
PAUSING_LABEL = "pausing at the next turn boundary…"
ACTIVITY_LABELS = {"model": "waiting for the model", "writing": "writing", "thinking": "thinking",
                   "tool_call": "writing a tool call"}

_PHASE_COLORS = {"running": COLORS["accent"], "waiting": COLORS["warn"], "paused": COLORS["warn"],
                 "finished": COLORS["ok"], "error": COLORS["error"], "interrupted": COLORS["warn"]}
_S_ROOT = ("font-family: var(--jp-content-font-family, system-ui, -apple-system, 'Segoe UI', "
           f"sans-serif); font-size: var(--jp-content-font-size1, 14px); line-height: 1.5; "
           f"color: {FG}; max-width: 100%;")
_S_BAR = (f"display: flex; align-items: center; gap: 12px; flex-wrap: wrap; margin-top: 8px; "
          f"padding: 4px 8px; border-top: 1px solid {BORDER}; font-size: 0.88em; "
          f"color: {MUTED_COLOR};")


def streamed_chars(items: Iterable[dict[str, Any]]) -> int:
    """Characters of text and thinking in ``items`` (as JavaScript counts them)."""
    return sum(utf16_length(item.get("text") or "") for item in items
               if item.get("kind") in ("text", "thinking"))


def token_figures(status: dict[str, Any], chars: int) -> str:
    """``1,200 in · 80 out``; the call in flight estimated and marked ``~`` until the provider
    reports it: its context's estimate in, a token per four characters streamed since out."""
    pending = status.get("pending_input") or 0
    extra = max(0, chars - int(status.get("usage_chars") or 0))
    tokens_in = ("~" if pending else "") + format_int((status.get("input_tokens") or 0) + pending)
    tokens_out = ("~" if extra else "") + format_int(
        (status.get("output_tokens") or 0) + math.ceil(extra / 4))
    return f"{tokens_in} in · {tokens_out} out"


def context_share(status: dict[str, Any]) -> float | None:
    """How full the model's window was at the last call (0 to 1), or None before any."""
    used, window = status.get("context_used"), status.get("context_window")
    if not isinstance(used, int) or not isinstance(window, int) or window <= 0:
        return None
    return min(1.0, used / window)


def context_label(status: dict[str, Any]) -> str:
    """``context 45% of 200k`` (empty before the first call reports it)."""
    share = context_share(status)
    if share is None:
        return ""
    window = int(status["context_window"])
    size = f"{window / 1000:.0f}k" if window >= 1000 else str(window)
    return f"context {share:.0%} of {size}"


def phase_label(status: dict[str, Any], waiting: bool) -> str:
    """The status line's first words: the phase, or what a running run waits for."""
    phase = status.get("phase") or "idle"
    label = PHASE_LABELS.get(phase, phase)
    running = phase == "running"
    if running and waiting:
        label = "waiting for your approval"
    if running and status.get("pausing"):
        label = PAUSING_LABEL
    if running and status.get("paused"):
        label = PAUSED_LABEL
    if running and status.get("stopping"):
        label = "stopping…"
    reason = status.get("reason")
    if phase == "finished" and reason and reason != "end_turn":
        label += f" ({reason})"
    return label


def activity_label(status: dict[str, Any], items: Iterable[dict[str, Any]],
                   waiting: bool) -> str:
    """What a running run is doing: the tools running, else the model's activity."""
    if status.get("phase") != "running" or waiting or status.get("stopping") or status.get("paused"):
        return ""
    tools = [item["name"] for item in items if item.get("kind") == "tool"
             and not item.get("agent") and item.get("status") == "running"]
    if tools:
        return "running " + ", ".join(tools)
    return ACTIVITY_LABELS.get(str(status.get("activity")), "")


def turn_label(status: dict[str, Any]) -> str:
    """``turn 2 of 10``, or the final answer past the limit."""
    turn, most = status.get("turn") or 0, status.get("max_turns")
    if turn and most:
        return f"final answer (limit {most} turns)" if turn > most else f"turn {turn} of {most}"
    return f"turn {turn}" if turn else ""


# -- drawing -------------------------------------------------------------------------------------


@dataclass
class _Node:
    item: dict[str, Any]
    orphan: bool = False
    children: list[_Node] = field(default_factory=list)  # a tool card: sub-agents it started
    items: list[_Node] = field(default_factory=list)  # a sub-agent card: its own items


def _tree(items: list[dict[str, Any]]) -> list[_Node]:
    """Nests items as the live view does: a sub-agent's card under the call that started it, its
    items inside its card; an item of an unknown sub-agent stays at the top, labelled."""
    top: list[_Node] = []
    calls: dict[tuple[str, str], _Node] = {}
    agents: dict[str, _Node] = {}
    for item in items:
        agent = item.get("agent")
        node = _Node(item, orphan=bool(agent) and agent not in agents)
        parent_call = calls.get((agent or "", str(item.get("parent_call_id"))))
        if item.get("kind") == "subagent" and item.get("parent_call_id") and parent_call:
            parent_call.children.append(node)
        elif agent and agent in agents:
            agents[agent].items.append(node)
        else:
            top.append(node)
        if item.get("kind") == "tool":
            calls[(agent or "", str(item.get("call_id")))] = node
        elif item.get("kind") == "subagent":
            agents[str(item.get("agent_id"))] = node
    return top


def _draw(node: _Node) -> str:
    """The item's HTML (``item_html``), what it contains drawn into it."""
    out = item_html(node.item, "".join(_draw(child) for child in node.children + node.items))
    if out and node.orphan:  # the live view labels it with CSS generated content, which is not text
        label = (f'<div aria-hidden="true" style="{S_MUTED} font-size: 0.8em;">'
                 f'↳ {esc(node.item.get("agent"))}</div>')
        out = f'<div style="margin-left: 1.5em;">{label}{out}</div>'
    return out


def _draw_context_meter(status: dict[str, Any]) -> str:
    """The window's fill as a small bar and ``context 45% of 200k``; amber once warned."""
    share = context_share(status)
    if share is None:
        return ""
    color = _PHASE_COLORS["waiting"] if status.get("context_warned") or share >= 0.8 else _PHASE_COLORS["running"]
    title = f"{int(status['context_used']):,} of {int(status['context_window']):,} tokens of the model's context window at the last call"
    bar = (f'<span aria-hidden="true" style="display: inline-block; width: 48px; height: 6px; margin-right: 4px; '
           f'vertical-align: middle; border-radius: 3px; background: {BORDER};">'
           f'<span style="display: block; width: {share * 100:.0f}%; height: 100%; border-radius: 3px; background: {color};"></span></span>')
    return f'<span class="ak-stat ak-context" title="{esc(title)}">{bar}{esc(context_label(status))}</span>'


def _draw_status(status: dict[str, Any], items: list[dict[str, Any]]) -> str:
    waiting = status.get("phase") == "running" and any(
        item.get("status") == "awaiting_approval" for item in items)
    phase = status.get("phase") or "idle"
    held = phase == "running" and bool(status.get("paused"))
    dot = _PHASE_COLORS.get("waiting" if waiting else "paused" if held else phase, MUTED_COLOR)
    spans = [f'<span class="ak-phase" style="font-weight: 600; color: {FG};">'
             f'<span aria-hidden="true" style="color: {dot};">● </span>'
             f'{esc(phase_label(status, waiting))}</span>']
    for text in (activity_label(status, items, waiting), turn_label(status),
                 token_figures(status, streamed_chars(items)), _cost_label(status),
                 format_seconds(status.get("elapsed_s"))):
        if text:
            spans.append(f'<span class="ak-stat">{esc(text)}</span>')
    meter = _draw_context_meter(status)
    if meter:
        spans.append(meter)
    if status.get("model"):
        spans.append(f'<span class="ak-stat">{esc(status["model"])}</span>')
    return f'<div class="ak-statusbar" style="{_S_BAR}">{"".join(spans)}</div>'


def _cost_label(status: dict[str, Any]) -> str:
    """The cost, and the run's budget when it has one (as the live view says it)."""
    cap = status.get("max_cost")
    return format_cost(status.get("cost_usd")) + (f" of ${cap:.2f} budget" if isinstance(cap, (int, float)) else "")


def render_html(state: dict[str, Any]) -> str:
    """The transcript of the view model ``state`` (``Transcript.to_json()``) as static HTML."""
    items = list(state.get("items") or [])
    status = dict(state.get("status") or {})
    body = "".join(_draw(node) for node in _tree(items))
    return (f'<div class="ak-static" data-phase="{esc(status.get("phase") or "idle")}" '
            f'style="{_S_ROOT}"><div class="ak-items" style="{S_ITEMS}">{body}</div>'
            f'{_draw_status(status, items)}</div>')


@dataclass(frozen=True)
class StaticTranscript:
    """What a run showed, as static HTML (``text/html``) and its summary in plain text.

    Example:
        >>> display(StaticTranscript.from_events(result.events))  # doctest: +SKIP
    """

    html: str
    text: str

    @classmethod
    def from_transcript(cls, transcript: Transcript) -> StaticTranscript:
        """The transcript of the run folded into ``transcript`` (finished or not)."""
        return cls(render_html(transcript.to_json()), RunSummary.from_transcript(transcript).text)

    @classmethod
    def from_events(cls, events: Iterable[AgentEvent], *, complete: bool = True) -> StaticTranscript:
        """The transcript of a run given its events. With ``complete`` (no more will come),
        events that stop before the run's end (a journal of a kernel that died) show the run as
        interrupted; without, as still running."""
        transcript = Transcript()
        first = last = None
        for event in events:
            first = first or event
            last = event
            transcript.apply(event)
        if complete and first is not None and last is not None:
            transcript.mark_interrupted(max(0.0, last.ts - first.ts))
        return cls.from_transcript(transcript)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """The HTML, and the plain-text summary for plain-text readers and nbval."""
        return {"text/plain": self.text, "text/html": self.html}

    def __repr__(self) -> str:
        """The plain-text rendering."""
        return self.text
