"""jupyter.item_html — the HTML of one transcript item, drawn once for every surface.

Each item of a run's transcript (a text or thinking block, a tool card, a sub-agent card, a
compaction card, a notice, a steered message; see ``items.py``) is drawn here, from its
``to_json()`` shape, and nowhere else: the live view (``view.py`` sends the HTML to
``widgets/agent_view.js``, which inserts it and adds the controls) and the lasting transcript
(``static_view.py`` nests the same HTML into a whole run) show the same bytes.

Model output goes through ``summary.markdown_to_html`` (raw HTML escaped, only http(s) and
mailto links); everything else is escaped text. Styles are inline (JupyterLab's theme variables
with fallbacks), since saved and exported outputs carry no stylesheet. Class names and ``data-``
attributes are what the live view finds its way by: ``data-slot`` marks a container whose
content the live view fills itself (a tool card's sub-agents, a sub-agent card's items, the
controls of a card waiting for approval).

A block still being streamed is drawn in parts (``block_frame`` around ``block_body``) so the
live view can be sent each finished paragraph once (``stable_end`` says where they end) instead
of the whole block per change.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, TypeGuard

from agent_kernel.jupyter._items import utf16_length
from agent_kernel.jupyter._summary import format_cost, markdown_to_html, one_decimal

STATUS_LABELS = {"queued": "queued", "awaiting_approval": "awaiting approval", "running": "running",
                 "done": "done", "error": "error", "rejected": "rejected", "cancelled": "cancelled"}
AGENT_STATUS_LABELS = {"running": "running", "done": "done", "error": "error",
                       "cancelled": "cancelled"}
#: The heading of a message a person steered into the run.
USER_LABEL = "You (steered in)"

# -- inline styles -------------------------------------------------------------------------------

FG = "var(--jp-content-font-color1, inherit)"
MUTED_COLOR = "var(--jp-content-font-color2, #6e7781)"
BORDER = "var(--jp-border-color2, rgba(127, 127, 127, 0.35))"
MONO = "var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, Consolas, monospace)"
COLORS = {
    "accent": "var(--jp-brand-color1, #1a73e8)", "ok": "var(--jp-success-color1, #1a7f37)",
    "warn": "var(--jp-warn-color1, #9a6700)", "error": "var(--jp-error-color1, #cf222e)",
}
S_ITEMS = "display: flex; flex-direction: column; gap: 6px;"
S_MUTED = f"color: {MUTED_COLOR};"
_STATUS_COLORS = {"running": COLORS["accent"], "done": COLORS["ok"],
                  "awaiting_approval": COLORS["warn"], "error": COLORS["error"],
                  "rejected": COLORS["error"]}
_S_CARD = (f"border: 1px solid {BORDER}; border-radius: 6px; padding: 6px 10px; "
           "background: var(--jp-layout-color1, rgba(127, 127, 127, 0.06));")
_S_HEAD = "display: flex; align-items: baseline; gap: 8px; flex-wrap: wrap;"
_S_NAME = f"font-family: {MONO}; font-weight: 600;"
_S_PRE = (f"font-family: {MONO}; font-size: var(--jp-code-font-size, 13px); "
          "background: var(--jp-cell-editor-background, rgba(127, 127, 127, 0.1)); "
          "border-radius: 4px; padding: 6px 8px; white-space: pre-wrap; word-break: break-word; "
          "overflow: auto; max-height: 24em; margin: 4px 0;")
_S_SUMMARY = f"cursor: pointer; color: {MUTED_COLOR}; font-size: 0.92em;"
# A diff's lines: marked at the left, the text in the view's own colour (contrast in both themes).
_S_DIFF_LINE = f"display: block; padding-left: 6px; border-left: 3px solid transparent; color: {FG};"
_DIFF_LINES = {
    "ak-diff-file": "font-weight: 600;",
    "ak-diff-hunk": f"border-left-color: {COLORS['accent']}; font-style: italic;",
    "ak-diff-add": f"border-left-color: {COLORS['ok']}; background: rgba(46, 160, 67, 0.15);",
    "ak-diff-del": f"border-left-color: {COLORS['error']}; background: rgba(248, 81, 73, 0.15);",
    "ak-diff-same": "",
}
_PICTURE_SOURCE = ("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;")


def esc(text: Any) -> str:
    """``text`` as HTML text or attribute value."""
    return html.escape(str(text), quote=True)


def _badge(label: str, status: str) -> str:
    color = _STATUS_COLORS.get(status, MUTED_COLOR)
    weight = " font-weight: 600;" if status == "awaiting_approval" else ""
    return (f'<span class="ak-badge ak-status-{esc(status)}" style="font-size: 0.8em; '
            f'border-radius: 999px; padding: 0 8px; border: 1px solid currentColor; '
            f'white-space: nowrap; color: {color};{weight}">{esc(label)}</span>')


def _details(cls: str, summary: str, body: str) -> str:
    return (f'<details class="{cls}" style="margin: 2px 0;"><summary style="{_S_SUMMARY}">'
            f'{summary}</summary>{body}</details>')


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- formatting, the same on every surface ----------------------------------------------------


def format_int(n: Any) -> str:
    """A count with thousands separators (``0`` for anything not a number)."""
    return f"{n:,}" if _number(n) else "0"


def format_seconds(s: Any) -> str:
    """``2.5 s`` or ``3 min 07 s``; empty when unknown."""
    if not _number(s):
        return ""
    if s < 60:
        return f"{one_decimal(s)} s"
    whole = math.floor(s + 0.5)  # Math.round, as the live view's clock
    return f"{whole // 60} min {whole % 60:02d} s"


def preview(text: str, max_lines: int = 4, max_chars: int = 400) -> str:
    """The first lines of ``text``, `` …`` marking a cut."""
    text = str(text)
    out = "\n".join(text.split("\n")[:max_lines])
    if utf16_length(out) > max_chars:
        out = out.encode("utf-16-le")[: 2 * max_chars].decode("utf-16-le", "ignore")
    return out.rstrip() + " …" if utf16_length(out) < utf16_length(text) else out


def decision_label(card: dict[str, Any]) -> str:
    """What a tool card says of its approval: ``Approved by person``, ``Rejected by person: why``,
    ``Rejected: timed out after 30 s``; empty while undecided."""
    if not card.get("decision"):
        return ""
    if card.get("decided_by") == "timeout":
        waited = card.get("timed_out_s")
        waited = float(waited) if _number(waited) else 0.0
        # Whole seconds, as Math.round; tenths under ten seconds, as toFixed(1).
        said = f"{waited:.1f}" if waited < 10 else format_int(math.floor(waited + 0.5))
        return f"Rejected: timed out after {said} s"
    verb = "Rejected" if card.get("status") == "rejected" else \
        "Always allowed" if card["decision"] == "always_allow" else "Approved"
    return verb + (f" by {card['decided_by']}" if card.get("decided_by") else "") + \
        (f": {card['reason']}" if card.get("reason") else "")


# -- streamed blocks -------------------------------------------------------------------------------

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def stable_end(text: str, start: int = 0) -> int:
    """Where the finished part of streamed Markdown ends, looking from ``start`` (itself such an
    end): before the first unindented line that follows a blank line outside a fenced code block
    (so a list item's continuation stays whole), or after a fence closed at the left margin.

    Markdown up to there renders the same whatever follows, in all but a few cases (a list whose
    items a blank line parts, a link defined further down), which the finished block corrects.
    """
    end = start
    fence: str | None = None
    fence_at_margin = False
    after_blank = False
    pos = start
    while True:
        nl = text.find("\n", pos)
        line = text[pos:] if nl < 0 else text[pos:nl]
        if fence is None and after_blank and line[:1].strip():
            end = pos
        if nl < 0:
            return end  # the last line is still being written
        opening = _FENCE.match(line)
        if fence is not None:
            if opening and opening[1][0] == fence[0] and len(opening[1]) >= len(fence) \
                    and not line[opening.end():].strip():
                fence = None
                if fence_at_margin and line.startswith(opening[1]):
                    end = nl + 1
            after_blank = False
        elif opening:
            fence, fence_at_margin = opening[1], line.startswith(opening[1])
            after_blank = False
        else:
            after_blank = not line.strip()
        pos = nl + 1


def block_body(kind: str, text: str) -> str:
    """The inside of a text block (Markdown) or a thinking block (plain text) drawn from
    ``text``; drawing two pieces one after the other is drawing them together, for the pieces
    ``stable_end`` cuts."""
    return markdown_to_html(text) if kind == "text" else esc(text)


def block_frame(item: dict[str, Any]) -> tuple[str, str]:
    """What a text or thinking block's HTML has before and after its ``block_body``."""
    if item.get("kind") == "thinking":
        chars = utf16_length(item.get("text") or "")
        return (f'<details class="ak-item ak-thinking"><summary style="cursor: pointer; '
                f'color: {MUTED_COLOR}; font-style: italic;">Thinking ({format_int(chars)} '
                f'characters)</summary><div class="ak-thinking-text" style="white-space: pre-wrap; '
                f'color: {MUTED_COLOR}; font-size: 0.95em; border-left: 2px solid {BORDER}; '
                'padding-left: 0.8em; margin-top: 4px;">', "</div></details>")
    if item.get("discarded"):
        return ('<div class="ak-item ak-text ak-discarded" style="opacity: 0.5; '
                'text-decoration: line-through;" title="Discarded: the model call was retried">'
                '<div class="ak-md">', "</div></div>")
    return '<div class="ak-item ak-text"><div class="ak-md">', "</div></div>"


# -- items -----------------------------------------------------------------------------------------


def _draw_block(item: dict[str, Any], children: str) -> str:
    before, after = block_frame(item)
    return before + block_body(str(item.get("kind")), item.get("text") or "") + after


def _draw_diff(diff: str) -> str:
    lines = []
    for line in diff.split("\n"):
        kind = "ak-diff-file" if line.startswith(("+++", "---")) else "ak-diff-hunk" \
            if line.startswith("@@") else "ak-diff-add" if line.startswith("+") else "ak-diff-del" \
            if line.startswith("-") else "ak-diff-same"
        lines.append(f'<span class="{kind}" style="{_S_DIFF_LINE} {_DIFF_LINES[kind]}">'
                     f'{esc(line or " ")}</span>')
    return (f'<pre class="ak-pre ak-diff-view" aria-label="What this call would change" '
            f'style="{_S_PRE}">{"".join(lines)}</pre>')


def _draw_tool(it: dict[str, Any], children: str) -> str:
    status = str(it.get("status"))
    border = f" border-color: {COLORS['warn']}; border-width: 2px;" \
        if status == "awaiting_approval" else ""
    parts = [f'<div class="ak-item ak-card ak-tool" data-status="{esc(status)}" '
             f'data-call-id="{esc(it.get("call_id"))}" style="{_S_CARD}{border}">',
             f'<div class="ak-card-head" style="{_S_HEAD}"><span class="ak-tool-name" '
             f'style="{_S_NAME}">{esc(it.get("name"))}</span>',
             _badge(STATUS_LABELS.get(status, status), status)]
    duration = format_seconds(it.get("duration_s"))
    if duration:
        parts.append(f'<span class="ak-muted" style="{S_MUTED}">{duration}</span>')
    parts.append("</div>")
    # What a write would change, for the person deciding: read from disk when the approval was
    # asked for, so once decided it may no longer be what the call changed; not drawn then.
    diff = it.get("diff") if status == "awaiting_approval" else None
    if diff:
        parts.append(_draw_diff(str(diff)))
    if it.get("arguments"):
        parts.append(_details("ak-args", "Arguments (JSON)" if diff else "Arguments",
                              f'<pre class="ak-pre" style="{_S_PRE}">{esc(it["arguments"])}</pre>'))
    fraction = it.get("fraction") if _number(it.get("fraction")) else None
    if status == "running" and (it.get("progress") or fraction is not None):
        value = f' value="{fraction}"' if fraction is not None else ""
        parts.append(f'<div class="ak-progress" style="display: flex; align-items: center; gap: 8px; '
                     f'font-size: 0.9em;"><span class="ak-muted" style="{S_MUTED}">'
                     f'{esc(it.get("progress") or "")}</span><progress max="1"{value}></progress></div>')
    if status == "awaiting_approval":
        reason = it.get("approval_reason")
        # white-space: a card's preview (a cell's new source, a diff) keeps its lines
        parts.append(f'<div class="ak-ask" style="font-weight: 600; color: {COLORS["warn"]}; '
                     f'white-space: pre-wrap;">Approval needed{": " + esc(reason) if reason else ""}</div>'
                     '<div class="ak-approval" data-slot="approval"></div>')
    said = decision_label(it)
    if said:
        parts.append(f'<div class="ak-decision" style="{S_MUTED} font-size: 0.9em;">{esc(said)}</div>')
    style = f' style="{S_ITEMS} margin: 6px 0 2px;"' if children else ""
    parts.append(f'<div class="ak-children" data-slot="children"{style}>{children}</div>')
    result = it.get("result")
    if isinstance(result, str):
        shown = preview(result)
        error = (" ak-error", f" color: {COLORS['error']};") if it.get("is_error") else ("", "")
        parts.append(f'<pre class="ak-pre ak-result-preview{error[0]}" style="{_S_PRE}{error[1]}">'
                     f'{esc(shown or "(empty result)")}</pre>')
        for image in it.get("images") or ():  # data URLs of the pictures the model got: no script, no fetch
            src = str(image.get("src", ""))
            if src.startswith(_PICTURE_SOURCE):
                parts.append(f'<img class="ak-picture" src="{esc(src)}" alt="{esc(image.get("alt", ""))}" '
                             'style="max-width: min(100%, 480px); margin: 4px 6px 0 0;">')
        if shown != result:
            chars = it.get("result_chars") or 0
            cut = f", first {format_int(utf16_length(result))} shown" \
                if chars > utf16_length(result) else ""
            parts.append(_details("ak-result", f"Full result ({format_int(chars)} characters{cut})",
                                  f'<pre class="ak-pre" style="{_S_PRE}">{esc(result)}</pre>'))
    parts.append("</div>")
    return "".join(parts)


def _draw_user(it: dict[str, Any], children: str) -> str:
    return (f'<div class="ak-item ak-user" style="align-self: flex-end; max-width: 85%; '
            f'border: 1px solid {BORDER}; border-radius: 10px 10px 2px 10px; padding: 4px 10px; '
            f'background: var(--jp-layout-color2, rgba(127, 127, 127, 0.12));">'
            f'<div class="ak-user-label" style="{S_MUTED} font-size: 0.8em;">{USER_LABEL}</div>'
            f'<div class="ak-user-text" style="white-space: pre-wrap; word-break: break-word;">'
            f'{esc(it.get("text") or "")}</div></div>')


def _draw_compaction(it: dict[str, Any], children: str) -> str:
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
             f'<div class="ak-card-head" style="{_S_HEAD}"><span class="ak-tool-name" '
             f'style="{_S_NAME}">{title}</span>']
    if figures:
        parts.append(f'<span class="ak-muted" style="{S_MUTED}">{esc(" · ".join(figures))}</span>')
    parts.append("</div>")
    if it.get("summary"):
        parts.append(_details("ak-args", "Summary",
                              f'<div class="ak-md">{markdown_to_html(it["summary"])}</div>'))
    parts.append("</div>")
    return "".join(parts)


def _draw_subagent(it: dict[str, Any], children: str) -> str:
    status = str(it.get("status"))
    running = status == "running"
    edge = {"error": COLORS["error"], "cancelled": MUTED_COLOR}.get(status, COLORS["accent"])
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
    parts = [f'<details class="ak-item ak-card ak-agent-card" data-status="{esc(status)}" '
             f'data-agent-id="{esc(it.get("agent_id"))}"{" open" if running else ""} '
             f'style="{_S_CARD} border-left: 3px solid {edge}; padding: 4px 8px 6px;">',
             f'<summary class="ak-agent-summary" style="cursor: pointer;">'
             f'<div class="ak-card-head" style="{_S_HEAD} display: inline-flex;">'
             f'<span class="ak-tool-name" style="{_S_NAME}">{esc(name)}</span>'
             f'<span class="ak-muted" style="{S_MUTED}">sub-agent</span>',
             _badge(AGENT_STATUS_LABELS.get(status, status), status)]
    if figures:
        parts.append(f'<span class="ak-agent-figures" style="{S_MUTED} font-size: 0.88em;">'
                     f'{esc(" · ".join(figures))}</span>')
    parts.append("</div>")
    if not running and said:
        error = (" ak-error", COLORS["error"]) if status == "error" else ("", MUTED_COLOR)
        parts.append(f'<div class="ak-agent-outcome{error[0]}" style="padding-left: 1.1em; '
                     f'font-size: 0.9em; color: {error[1]}; overflow: hidden; '
                     f'text-overflow: ellipsis; white-space: nowrap;">{esc(preview(said, 1, 200))}</div>')
    parts.append("</summary>")
    if it.get("prompt"):
        parts.append(f'<div class="ak-agent-task" title="{esc(it["prompt"])}" style="{S_MUTED} '
                     f'font-size: 0.9em; white-space: pre-wrap; margin: 4px 0;">'
                     f'{esc("Task: " + preview(it["prompt"], 3, 300))}</div>')
    parts.append(f'<div class="ak-items ak-agent-items" data-slot="items" style="{S_ITEMS} '
                 f'margin-top: 4px;">{children}</div></details>')
    return "".join(parts)


def _draw_notice(it: dict[str, Any], children: str) -> str:
    level = str(it.get("level"))
    edge = {"warning": COLORS["warn"], "error": COLORS["error"]}.get(level, BORDER)
    color = f" color: {COLORS['error']};" if level == "error" else \
        f" color: {MUTED_COLOR};" if level == "info" else ""
    role = "alert" if level == "error" else "status"
    return (f'<div class="ak-item ak-notice ak-level-{esc(level)}" role="{role}" '
            f'style="font-size: 0.92em; padding: 2px 8px; border-left: 3px solid {edge};{color}">'
            f'{esc(it.get("message"))}</div>')


_DRAWERS = {"text": _draw_block, "thinking": _draw_block, "tool": _draw_tool,
            "compaction": _draw_compaction, "subagent": _draw_subagent, "notice": _draw_notice,
            "user": _draw_user}


def item_html(item: dict[str, Any], children: str = "") -> str:
    """The HTML of one item (its ``to_json()`` shape); empty for a kind it does not know.

    ``children`` goes into the item's container: the cards of the sub-agents a tool call started,
    or a sub-agent's own items. The live view is sent items drawn without them and fills the
    container itself.
    """
    drawer = _DRAWERS.get(str(item.get("kind")))
    return drawer(item, children) if drawer is not None else ""
