"""journal.html_diff — two runs side by side as static HTML: ``diff_view(a, b)`` and ``RunDiff``.

``diff_runs`` gives the comparison as a DataFrame; this module draws it for a notebook: one row
per turn, the two runs in two columns, the first turn where they part marked, and in each cell the
assistant's text, its tool calls with their arguments, their results (long ones cut, the whole
text one click away), tokens, cost and duration. Fields that differ between the two sides of a
turn are marked by a bar at their left (no fill); the first divergence by a bar and
its label.

Every piece of text is JupyterLab's first font colour on its layout background (each cell sets
that background, so the output area's striped table rows do not show through): readable in the
light and the dark theme alike (contrast >= 4.5:1, checked in the browser). Emphasis comes from
weight, size and coloured borders, never from a tinted fill or lowered opacity under the text.

The HTML is static: inline styles using JupyterLab's theme variables with fallbacks, no script,
no stylesheet, nothing fetched, so it reads the same in a live notebook, a saved one, nbconvert
and GitHub. Model output is escaped text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_kernel.journal._diff import diff_runs

#: Characters of a tool result shown before it is cut (the whole result stays in a <details>).
RESULT_PREVIEW = 300
#: Characters of the assistant's text shown before it is cut.
TEXT_PREVIEW = 1_500
#: Lines of a tool result shown before it is cut.
PREVIEW_LINES = 6

_FG = "var(--jp-content-font-color1, inherit)"
#: Labels: the same colour as the text (a second, fainter colour fails contrast on some
#: backgrounds); they stand apart by size.
_MUTED = _FG
_BG = "var(--jp-layout-color0, transparent)"
_BORDER = "var(--jp-border-color2, rgba(127, 127, 127, 0.35))"
_ACCENT = "var(--jp-warn-color1, #9a6700)"
_MONO = "var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, Consolas, monospace)"
_S_TABLE = (f"border-collapse: collapse; width: 100%; table-layout: fixed; color: {_FG}; "
            "font-family: var(--jp-content-font-family, system-ui, sans-serif); "
            "font-size: var(--jp-content-font-size1, 14px); line-height: 1.45;")
_S_CELL = (f"border: 1px solid {_BORDER}; padding: 6px 8px; vertical-align: top; text-align: left; "
           f"color: {_FG}; background: {_BG};")
_S_PRE = (f"font-family: {_MONO}; font-size: var(--jp-code-font-size, 12px); white-space: pre-wrap; "
          f"word-break: break-word; margin: 2px 0; color: {_FG}; background: {_BG}; "
          f"border: 1px solid {_BORDER}; border-radius: 3px; padding: 2px 6px;")
_S_LABEL = f"color: {_MUTED}; font-size: 0.85em;"
#: A field that differs from the other side: a bar at its left, no fill under the text.
_S_CHANGED = f" border-left: 3px solid {_ACCENT}; padding-left: 6px;"


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _cut(text: str, limit: int, style: str, lines: int | None = None) -> str:
    """``text`` in a block; past ``limit`` characters (or ``lines`` lines) its start, with the whole
    text in a <details> and, for hovering, in the start's title."""
    start = text[:limit]
    if lines is not None:
        start = "\n".join(start.split("\n")[:lines])
    if start == text:
        return f'<div style="{style}">{_esc(text)}</div>'
    more = len(text) - len(start)
    return (f'<details style="margin: 2px 0;"><summary style="cursor: pointer; list-style: none;" '
            f'title="{_esc(text[:5_000])}"><div style="{style}">{_esc(start)}… <span style="{_S_LABEL}">'
            f'({more:,} more characters: click for all)</span></div></summary>'
            f'<div style="{style}">{_esc(text)}</div></details>')


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:  # NaN
        return None
    return float(value)


def _figures(tokens: Any, cost: Any, duration: Any) -> str:
    parts = []
    count = _number(tokens)
    parts.append(f"{int(count):,} tokens" if count is not None else "— tokens")
    price = _number(cost)
    parts.append(f"${price:.4f}" if price is not None else "—")  # the cost format of the live view
    seconds = _number(duration)
    if seconds is not None:
        parts.append(f"{seconds:.1f} s")
    return " · ".join(parts)


def _side(row: Any, side: str, other: str) -> str:
    """One side of one turn: text, tool calls, results, figures; what differs from ``other`` tinted."""
    text = row[f"{side}_text"]
    calls, results = row[f"{side}_tool_calls"], row[f"{side}_results"]
    if text is None and calls is None:
        return f'<td style="{_S_CELL} color: {_MUTED}; font-style: italic;">no such turn on this side</td>'

    def tint(name: str) -> str:
        mine, theirs = row[f"{side}_{name}"], row[f"{other}_{name}"]
        return _S_CHANGED if theirs is not None and mine != theirs else ""

    parts = [f'<td class="ak-diff-{side}" style="{_S_CELL}">']
    sent = row.get(f"{side}_sent") if hasattr(row, "get") else None
    if sent:  # a hook replaced the request: what the model was sent instead
        parts.append(f'<div class="ak-diff-sent" style="margin-bottom: 4px;{tint("sent")}">'
                     f'<div style="{_S_LABEL}">sent instead (a hook replaced the request)</div>'
                     + _cut(str(sent), TEXT_PREVIEW, _S_PRE, PREVIEW_LINES) + "</div>")
    if text:
        parts.append(f'<div style="margin-bottom: 4px;{tint("text")}">'
                     + _cut(str(text), TEXT_PREVIEW, "white-space: pre-wrap; word-break: break-word;")
                     + "</div>")
    for i, call in enumerate(calls or []):
        result = results[i] if results is not None and i < len(results) else ""
        changed = tint("tool_calls") or tint("results")
        parts.append(f'<div class="ak-diff-call" style="margin: 4px 0; padding: 2px 4px;{changed}">'
                     f'<div style="{_S_LABEL}">tool call</div>'
                     f'<div style="{_S_PRE} font-weight: 600;">{_esc(call)}</div>'
                     f'<div style="{_S_LABEL}">result</div>'
                     + _cut(str(result), RESULT_PREVIEW, _S_PRE, PREVIEW_LINES) + "</div>")
    if not text and not calls:
        parts.append(f'<div style="{_S_LABEL} font-style: italic;">(no text, no tool calls)</div>')
    parts.append(f'<div style="{_S_LABEL} margin-top: 4px;">'
                 f'{_esc(_figures(row[f"{side}_tokens"], row[f"{side}_cost_usd"], row[f"{side}_duration_s"]))}</div>')
    parts.append("</td>")
    return "".join(parts)


@dataclass(frozen=True)
class RunDiff:
    """Two runs side by side, turn by turn; shown as HTML in a notebook.

    Attributes:
        frame: the comparison as ``diff_runs`` returns it (one row per turn).
        labels: the names of the two columns.
    """

    frame: Any
    labels: tuple[str, str] = ("a", "b")

    @property
    def first_divergence(self) -> int | None:
        """The first turn where the runs differ, or None when they agree throughout."""
        first = self.frame.attrs.get("first_divergence")
        return None if first is None else int(first)

    def to_html(self) -> str:
        """The comparison as static HTML (a table; see the module docstring)."""
        first = self.first_divergence
        a, b = (_esc(label) for label in self.labels)
        head = (f'<tr><th style="{_S_CELL} width: 5.5em;">turn</th>'
                f'<th style="{_S_CELL}">{a}</th><th style="{_S_CELL}">{b}</th></tr>')
        rows = []
        for turn, row in self.frame.iterrows():
            diverges = turn == first
            same = bool(row["same"])
            mark = f" border-left: 4px solid {_ACCENT};" if diverges else ""
            style = ""
            label = f'<div style="font-weight: 600;">{int(turn)}</div>'
            if diverges:
                label += (f'<div style="color: {_FG}; font-weight: 600; font-size: 0.85em;">'
                          "first divergence</div>")
            elif same:
                label += f'<div style="{_S_LABEL}">same</div>'
            rows.append(f'<tr class="ak-diff-turn{" ak-diff-first" if diverges else ""}" data-turn="{int(turn)}"{style}>'
                        f'<td style="{_S_CELL}{mark}">{label}</td>{_side(row, "a", "b")}{_side(row, "b", "a")}</tr>')
        if first is None:
            caption = "The two runs agree turn for turn."
        else:
            caption = f"The runs part at turn {first}."
        return (f'<div class="ak-diff" style="max-width: 100%; overflow-x: auto; '
                f'font-family: var(--jp-content-font-family, system-ui, sans-serif);">'
                f'<div style="{_S_LABEL} margin-bottom: 4px;">{_esc(caption)}</div>'
                f'<table style="{_S_TABLE}"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>')

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:
        """A one-line summary (the notebook's ``text/plain``)."""
        first = self.first_divergence
        where = "agree turn for turn" if first is None else f"part at turn {first}"
        return f"RunDiff({self.labels[0]} vs {self.labels[1]}: {where}, {len(self.frame)} turns shown)"


def diff_view(a: Any, b: Any, *, labels: Sequence[str] = ("a", "b"), all_turns: bool = True) -> RunDiff:
    """Shows two runs side by side in a notebook: ``diff_runs(a, b)`` as a two-column table.

    Args:
        a, b: journal paths, ``Journal`` objects, agents or sequences of ``AgentEvent``.
        labels: the column headings (default ``a`` and ``b``).
        all_turns: also show the turns before the first divergence (muted); False starts there.

    Returns:
        A ``RunDiff``: displayed as HTML; its ``frame`` is the DataFrame of ``diff_runs``.

    Example:
        >>> fork = agent.fork(at=1, model="openai:gpt-4.1")  # doctest: +SKIP
        >>> await fork.continue_run()  # doctest: +SKIP
        >>> diff_view(agent, fork, labels=("original", "gpt-4.1"))  # doctest: +SKIP
    """
    names = tuple(str(label) for label in labels)
    if len(names) != 2:
        from agent_kernel.errors import UserError

        raise UserError(f"diff_view: labels names the two runs, e.g. labels=('original', 'fork'); got {len(names)}.")
    return RunDiff(diff_runs(a, b, all_turns=all_turns), (names[0], names[1]))
