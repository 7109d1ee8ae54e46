"""jupyter.static_view — the lasting transcript of a run: static HTML drawn from the view model.

When a run ends, the cell's live view is replaced by this transcript, so a saved notebook shows
what the person saw, once, with no widget state and no kernel: in JupyterLab after a restart,
nbconvert, GitHub, VS Code and Colab. It is drawn from the same view model the live view draws
(``Transcript.to_json()``: the items and the status), element for element and label for label
as ``widgets/agent_view.js`` draws them, so the two cannot drift (a browser test compares their
text). Model output goes through ``summary.markdown_to_html`` (raw HTML escaped, only http(s)
and mailto links); everything else is escaped text.

Styles are inline (``style`` attributes using JupyterLab's theme variables with fallbacks), since
exported and saved outputs carry no stylesheet and some renderers drop ``<style>``; there is no
script. ``text/plain`` is the run's ``RunSummary.text``: deterministic for a deterministic run,
so notebook checkers such as nbval can compare it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_kernel.events._event import AgentEvent
from agent_kernel.jupyter._items import utf16_length
from agent_kernel.jupyter._summary import RunSummary, format_cost, markdown_to_html, one_decimal
from agent_kernel.jupyter._transcript import Transcript

__all__ = ["StaticTranscript", "activity_label", "decision_label", "phase_label", "render_html",
           "token_figures"]

# -- the labels the live view uses too (widgets/agent_view.js) ----------------------------------

STATUS_LABELS = {"queued": "queued", "awaiting_approval": "awaiting approval", "running": "running",
                 "done": "done", "error": "error", "rejected": "rejected", "cancelled": "cancelled"}
AGENT_STATUS_LABELS = {"running": "running", "done": "done", "error": "error",
                       "cancelled": "cancelled"}
PHASE_LABELS = {"idle": "waiting to start", "running": "running", "finished": "finished",
                "cancelled": "cancelled", "error": "error",
                "interrupted": "interrupted (the journal ends here)"}
PAUSED_LABEL = "paused — waiting at the turn boundary"
PAUSING_LABEL = "pausing at the next turn boundary…"
#: The heading of a message a person steered into the run.
USER_LABEL = "You (steered in)"
ACTIVITY_LABELS = {"model": "waiting for the model", "writing": "writing", "thinking": "thinking",
                   "tool_call": "writing a tool call"}

# -- inline styles -------------------------------------------------------------------------------

_FG = "var(--jp-content-font-color1, inherit)"
_MUTED_COLOR = "var(--jp-content-font-color2, #6e7781)"
_BORDER = "var(--jp-border-color2, rgba(127, 127, 127, 0.35))"
_MONO = "var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, Consolas, monospace)"
_COLORS = {
    "accent": "var(--jp-brand-color1, #1a73e8)", "ok": "var(--jp-success-color1, #1a7f37)",
    "warn": "var(--jp-warn-color1, #9a6700)", "error": "var(--jp-error-color1, #cf222e)",
}
_STATUS_COLORS = {"running": _COLORS["accent"], "done": _COLORS["ok"],
                  "awaiting_approval": _COLORS["warn"], "error": _COLORS["error"],
                  "rejected": _COLORS["error"]}
_PHASE_COLORS = {"running": _COLORS["accent"], "waiting": _COLORS["warn"], "paused": _COLORS["warn"],
                 "finished": _COLORS["ok"], "error": _COLORS["error"],
                 "interrupted": _COLORS["warn"]}
_S_ROOT = ("font-family: var(--jp-content-font-family, system-ui, -apple-system, 'Segoe UI', "
           f"sans-serif); font-size: var(--jp-content-font-size1, 14px); line-height: 1.5; "
           f"color: {_FG}; max-width: 100%;")
_S_ITEMS = "display: flex; flex-direction: column; gap: 6px;"
_S_CARD = (f"border: 1px solid {_BORDER}; border-radius: 6px; padding: 6px 10px; "
           "background: var(--jp-layout-color1, rgba(127, 127, 127, 0.06));")
_S_HEAD = "display: flex; align-items: baseline; gap: 8px; flex-wrap: wrap;"
_S_NAME = f"font-family: {_MONO}; font-weight: 600;"
_S_MUTED = f"color: {_MUTED_COLOR};"
_S_PRE = (f"font-family: {_MONO}; font-size: var(--jp-code-font-size, 13px); "
          "background: var(--jp-cell-editor-background, rgba(127, 127, 127, 0.1)); "
          "border-radius: 4px; padding: 6px 8px; white-space: pre-wrap; word-break: break-word; "
          "overflow: auto; max-height: 24em; margin: 4px 0;")
_S_SUMMARY = f"cursor: pointer; color: {_MUTED_COLOR}; font-size: 0.92em;"
_S_BAR = (f"display: flex; align-items: center; gap: 12px; flex-wrap: wrap; margin-top: 8px; "
          f"padding: 4px 8px; border-top: 1px solid {_BORDER}; font-size: 0.88em; "
          f"color: {_MUTED_COLOR};")


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _badge(label: str, status: str) -> str:
    color = _STATUS_COLORS.get(status, _MUTED_COLOR)
    weight = " font-weight: 600;" if status == "awaiting_approval" else ""
    return (f'<span class="ak-badge" style="font-size: 0.8em; border-radius: 999px; '
            f'padding: 0 8px; border: 1px solid currentColor; white-space: nowrap; '
            f'color: {color};{weight}">{_esc(label)}</span>')


# -- formatting, as the live view formats ------------------------------------------------------


def format_int(n: Any) -> str:
    """A count with thousands separators (``0`` for anything not a number)."""
    return f"{n:,}" if isinstance(n, (int, float)) and not isinstance(n, bool) else "0"


def format_seconds(s: Any) -> str:
    """``2.5 s`` or ``3 min 07 s``; empty when unknown."""
    if not isinstance(s, (int, float)) or isinstance(s, bool):
        return ""
    if s < 60:
        return f"{one_decimal(s)} s"
    whole = math.floor(s + 0.5)  # Math.round, as the live view
    return f"{whole // 60} min {whole % 60:02d} s"


def preview(text: str, max_lines: int = 4, max_chars: int = 400) -> str:
    """The first lines of ``text``, `` …`` marking a cut (as the live view's ``preview``)."""
    text = str(text)
    out = "\n".join(text.split("\n")[:max_lines])
    if utf16_length(out) > max_chars:
        out = out.encode("utf-16-le")[: 2 * max_chars].decode("utf-16-le", "ignore")
    return out.rstrip() + " …" if utf16_length(out) < utf16_length(text) else out


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
    item = node.item
    drawer = _DRAWERS.get(str(item.get("kind")))
    if drawer is None:
        return ""
    out = drawer(node)
    if node.orphan:  # the live view labels it with CSS generated content, which is not text
        label = (f'<div aria-hidden="true" style="{_S_MUTED} font-size: 0.8em;">'
                 f'↳ {_esc(item.get("agent"))}</div>')
        out = f'<div style="margin-left: 1.5em;">{label}{out}</div>'
    return out


def _draw_text(node: _Node) -> str:
    item = node.item
    style = " opacity: 0.5; text-decoration: line-through;" if item.get("discarded") else ""
    title = ' title="Discarded: the model call was retried"' if item.get("discarded") else ""
    body = markdown_to_html(item.get("text") or "")
    return (f'<div class="ak-item ak-text" style="{style.strip()}"{title}>'
            f'<div class="ak-md">{body}</div></div>')


def _draw_thinking(node: _Node) -> str:
    text = node.item.get("text") or ""
    return (f'<details class="ak-item ak-thinking"><summary style="cursor: pointer; '
            f'color: {_MUTED_COLOR}; font-style: italic;">Thinking '
            f'({format_int(utf16_length(text))} characters)</summary>'
            f'<div style="white-space: pre-wrap; color: {_MUTED_COLOR}; font-size: 0.95em; '
            f'border-left: 2px solid {_BORDER}; padding-left: 0.8em; margin-top: 4px;">'
            f'{_esc(text)}</div></details>')


def _details(summary: str, body: str) -> str:
    return (f'<details style="margin: 2px 0;"><summary style="{_S_SUMMARY}">{summary}</summary>'
            f'{body}</details>')


def _draw_tool(node: _Node) -> str:
    it = node.item
    status = str(it.get("status"))
    border = f" border-color: {_COLORS['warn']}; border-width: 2px;" \
        if status == "awaiting_approval" else ""
    parts = [f'<div class="ak-item ak-card ak-tool" style="{_S_CARD}{border}">',
             f'<div style="{_S_HEAD}"><span style="{_S_NAME}">{_esc(it.get("name"))}</span>',
             _badge(STATUS_LABELS.get(status, status), status)]
    duration = format_seconds(it.get("duration_s"))
    if duration:
        parts.append(f'<span style="{_S_MUTED}">{duration}</span>')
    parts.append("</div>")
    if it.get("arguments"):
        parts.append(_details("Arguments", f'<pre style="{_S_PRE}">{_esc(it["arguments"])}</pre>'))
    fraction = it.get("fraction")
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool):
        fraction = None
    if status == "running" and (it.get("progress") or fraction is not None):
        value = f' value="{fraction}"' if fraction is not None else ""
        parts.append(f'<div style="display: flex; align-items: center; gap: 8px; '
                     f'font-size: 0.9em;"><span style="{_S_MUTED}">{_esc(it.get("progress") or "")}'
                     f'</span><progress max="1"{value}></progress></div>')
    if status == "awaiting_approval":
        reason = it.get("approval_reason")
        # white-space: a card's preview (a cell's new source, a diff) keeps its lines
        parts.append(f'<div style="font-weight: 600; color: {_COLORS["warn"]}; white-space: pre-wrap;">Approval needed'
                     f'{": " + _esc(reason) if reason else ""}</div>')
    said = decision_label(it)
    if said:
        parts.append(f'<div style="{_S_MUTED} font-size: 0.9em;">{_esc(said)}</div>')
    if node.children:
        parts.append(f'<div style="{_S_ITEMS} margin: 6px 0 2px;">'
                     + "".join(_draw(child) for child in node.children) + "</div>")
    result = it.get("result")
    if isinstance(result, str):
        shown = preview(result)
        color = f" color: {_COLORS['error']};" if it.get("is_error") else ""
        parts.append(f'<pre style="{_S_PRE}{color}">{_esc(shown or "(empty result)")}</pre>')
        for image in it.get("images") or ():  # data URLs of the pictures the model got: no script, no fetch
            src = str(image.get("src", ""))
            if src.startswith(("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;")):
                parts.append(f'<img src="{_esc(src)}" alt="{_esc(str(image.get("alt", "")))}" '
                             'style="max-width: min(100%, 480px); margin: 4px 6px 0 0;">')
        if shown != result:
            chars = it.get("result_chars") or 0
            cut = f", first {format_int(utf16_length(result))} shown" \
                if chars > utf16_length(result) else ""
            parts.append(_details(f"Full result ({format_int(chars)} characters{cut})",
                                  f'<pre style="{_S_PRE}">{_esc(result)}</pre>'))
    parts.append("</div>")
    return "".join(parts)


def decision_label(card: dict[str, Any]) -> str:
    """What a tool card says of its approval: ``Approved by person``, ``Rejected by person: why``,
    ``Rejected: timed out after 30 s``; empty while undecided."""
    if not card.get("decision"):
        return ""
    if card.get("decided_by") == "timeout":
        waited = card.get("timed_out_s")
        waited = float(waited) if isinstance(waited, (int, float)) else 0.0
        # Whole seconds, as Math.round; tenths under ten seconds, as toFixed(1).
        said = f"{waited:.1f}" if waited < 10 else format_int(math.floor(waited + 0.5))
        return f"Rejected: timed out after {said} s"
    verb = "Rejected" if card.get("status") == "rejected" else \
        "Always allowed" if card["decision"] == "always_allow" else "Approved"
    return verb + (f" by {card['decided_by']}" if card.get("decided_by") else "") + \
        (f": {card['reason']}" if card.get("reason") else "")


def _draw_user(node: _Node) -> str:
    return (f'<div class="ak-item ak-user" style="align-self: flex-end; max-width: 85%; '
            f'border: 1px solid {_BORDER}; border-radius: 10px 10px 2px 10px; padding: 4px 10px; '
            f'background: var(--jp-layout-color2, rgba(127, 127, 127, 0.12));">'
            f'<div style="{_S_MUTED} font-size: 0.8em;">{USER_LABEL}</div>'
            f'<div style="white-space: pre-wrap; word-break: break-word;">'
            f'{_esc(node.item.get("text") or "")}</div></div>')


def _draw_compaction(node: _Node) -> str:
    it = node.item
    title = "Context compacted" if it.get("status") == "done" else "Compacting the context…"
    figures = []
    before, after = it.get("tokens_before"), it.get("tokens_after")
    if isinstance(before, int) and isinstance(after, int):
        figures.append(f"{format_int(before)} → {format_int(after)} tokens")
    elif isinstance(before, int):
        figures.append(f"{format_int(before)} tokens")
    if isinstance(it.get("messages_removed"), int):
        figures.append(f"{format_int(it['messages_removed'])} messages summarised")
    parts = [f'<div class="ak-item ak-card ak-compaction" style="{_S_CARD}">',
             f'<div style="{_S_HEAD}"><span style="{_S_NAME}">{title}</span>']
    if figures:
        parts.append(f'<span style="{_S_MUTED}">{_esc(" · ".join(figures))}</span>')
    parts.append("</div>")
    if it.get("summary"):
        parts.append(_details("Summary", f'<div class="ak-md">{markdown_to_html(it["summary"])}</div>'))
    parts.append("</div>")
    return "".join(parts)


def _draw_subagent(node: _Node) -> str:
    it = node.item
    status = str(it.get("status"))
    running = status == "running"
    edge = {"error": _COLORS["error"], "cancelled": _MUTED_COLOR}.get(status, _COLORS["accent"])
    figures: list[str] = []
    if not running:
        if isinstance(it.get("input_tokens"), int) or isinstance(it.get("output_tokens"), int):
            figures.append(f"{format_int(it.get('input_tokens'))} in · "
                           f"{format_int(it.get('output_tokens'))} out")
            figures.append(format_cost(it.get("cost_usd")))
        if isinstance(it.get("tool_calls"), int):
            n = it["tool_calls"]
            figures.append(f"{n} tool call{'' if n == 1 else 's'}")
        if format_seconds(it.get("duration_s")):
            figures.append(format_seconds(it.get("duration_s")))
    said = it.get("error") if status == "error" and it.get("error") else (it.get("result") or "")
    name = str(it.get("name")) + (f" · {it['task']}" if it.get("task") else "")
    parts = [f'<details class="ak-item ak-card ak-agent-card"{" open" if running else ""} '
             f'style="{_S_CARD} border-left: 3px solid {edge}; padding: 4px 8px 6px;">',
             f'<summary style="cursor: pointer;"><div style="{_S_HEAD} display: inline-flex;">'
             f'<span style="{_S_NAME}">{_esc(name)}</span>'
             f'<span style="{_S_MUTED}">sub-agent</span>',
             _badge(AGENT_STATUS_LABELS.get(status, status), status)]
    if figures:
        parts.append(f'<span style="{_S_MUTED} font-size: 0.88em;">{_esc(" · ".join(figures))}</span>')
    parts.append("</div>")
    if not running and said:
        color = _COLORS["error"] if status == "error" else _MUTED_COLOR
        parts.append(f'<div style="padding-left: 1.1em; font-size: 0.9em; color: {color}; '
                     f'overflow: hidden; text-overflow: ellipsis; white-space: nowrap;">'
                     f'{_esc(preview(said, 1, 200))}</div>')
    parts.append("</summary>")
    if it.get("prompt"):
        parts.append(f'<div style="{_S_MUTED} font-size: 0.9em; white-space: pre-wrap; '
                     f'margin: 4px 0;">{_esc("Task: " + preview(it["prompt"], 3, 300))}</div>')
    parts.append(f'<div style="{_S_ITEMS} margin-top: 4px;">'
                 + "".join(_draw(child) for child in node.items) + "</div></details>")
    return "".join(parts)


def _draw_notice(node: _Node) -> str:
    it = node.item
    level = str(it.get("level"))
    edge = {"warning": _COLORS["warn"], "error": _COLORS["error"]}.get(level, _BORDER)
    color = f" color: {_COLORS['error']};" if level == "error" else \
        f" color: {_MUTED_COLOR};" if level == "info" else ""
    role = "alert" if level == "error" else "status"
    return (f'<div class="ak-item ak-notice" role="{role}" style="font-size: 0.92em; '
            f'padding: 2px 8px; border-left: 3px solid {edge};{color}">'
            f'{_esc(it.get("message"))}</div>')


_DRAWERS = {"text": _draw_text, "thinking": _draw_thinking, "tool": _draw_tool,
            "compaction": _draw_compaction, "subagent": _draw_subagent, "notice": _draw_notice,
            "user": _draw_user}


def _draw_context_meter(status: dict[str, Any]) -> str:
    """The window's fill as a small bar and ``context 45% of 200k``; amber once warned."""
    share = context_share(status)
    if share is None:
        return ""
    color = _PHASE_COLORS["waiting"] if status.get("context_warned") or share >= 0.8 else _PHASE_COLORS["running"]
    title = f"{int(status['context_used']):,} of {int(status['context_window']):,} tokens of the model's context window at the last call"
    bar = (f'<span aria-hidden="true" style="display: inline-block; width: 48px; height: 6px; margin-right: 4px; '
           f'vertical-align: middle; border-radius: 3px; background: {_BORDER};">'
           f'<span style="display: block; width: {share * 100:.0f}%; height: 100%; border-radius: 3px; background: {color};"></span></span>')
    return f'<span class="ak-stat ak-context" title="{_esc(title)}">{bar}{_esc(context_label(status))}</span>'


def _draw_status(status: dict[str, Any], items: list[dict[str, Any]]) -> str:
    waiting = status.get("phase") == "running" and any(
        item.get("status") == "awaiting_approval" for item in items)
    phase = status.get("phase") or "idle"
    held = phase == "running" and bool(status.get("paused"))
    dot = _PHASE_COLORS.get("waiting" if waiting else "paused" if held else phase, _MUTED_COLOR)
    spans = [f'<span class="ak-phase" style="font-weight: 600; color: {_FG};">'
             f'<span aria-hidden="true" style="color: {dot};">● </span>'
             f'{_esc(phase_label(status, waiting))}</span>']
    for text in (activity_label(status, items, waiting), turn_label(status),
                 token_figures(status, streamed_chars(items)), _cost_label(status),
                 format_seconds(status.get("elapsed_s"))):
        if text:
            spans.append(f'<span class="ak-stat">{_esc(text)}</span>')
    meter = _draw_context_meter(status)
    if meter:
        spans.append(meter)
    if status.get("model"):
        spans.append(f'<span class="ak-stat">{_esc(status["model"])}</span>')
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
    return (f'<div class="ak-static" data-phase="{_esc(status.get("phase") or "idle")}" '
            f'style="{_S_ROOT}"><div class="ak-items" style="{_S_ITEMS}">{body}</div>'
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
