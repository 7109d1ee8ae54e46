"""journal.svg_timeline — a picture of a run over time: one lane per turn, bars for what took time.

``timeline(source)`` returns a ``Timeline``: its ``bars`` are a DataFrame, and it displays as
HTML in a live notebook (``html_timeline``: an inline SVG that fills the output's width and
takes its colours from the JupyterLab theme) with a self-contained SVG image beside it
(``to_svg``: no script, no external asset, fixed colours) for nbconvert, GitHub and any viewer
that shows images only. Hovering a bar shows its SVG ``<title>``: what it was (a tool's name and
arguments, a model call's tokens, an approval's decision) and how long it took.

Bars: model streaming (``llm_start`` → ``llm_complete``), tool executions (``tool_start`` →
``tool_result``), approval waits (``approval_required`` → ``approval_decision``) and
compactions (``compaction_start`` → ``compaction_complete``). Bars that overlap in one turn,
such as parallel tool calls, are stacked in sub-lanes. A bar with no end yet (a run in progress,
or killed) reaches the last event and is drawn dashed. Lanes are labelled by agent (sub-agents
by their id), run and turn (``researcher · run 1 · turn 0``); a label too long for the label
column ends in an ellipsis and keeps its full text in its ``<title>``.

``Timeline.picture()`` is the same SVG drawn as a PNG image (by resvg, a Rust renderer shipped
as a wheel: ``pip install resvg-py``, part of the ``lab`` extra). It is what a notebook meant to be
read saved should display: JupyterLab sanitises the HTML of an untrusted notebook (a notebook
someone else saved) and strips its inline SVG, and shows no ``image/svg+xml`` there either, but it
does show a PNG. Text is drawn with the system's sans-serif font, or DejaVu Sans from matplotlib
where that is installed and the system has none.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal._frames import source_events

BAR_COLUMNS = ("lane", "turn_id", "turn_counter", "sublane", "kind", "label", "start_s", "end_s", "finished",
               "run_id", "agent", "detail")
COLORS = {"model": "#4c78a8", "tool": "#f58518", "approval": "#e45756", "compaction": "#54a24b"}
_ENDS_MODEL = (EventType.LLM_COMPLETE, EventType.ERROR, EventType.RETRY, EventType.CANCELLED)
_ENDS_COMPACTION = (EventType.COMPACTION_COMPLETE, EventType.ERROR, EventType.CANCELLED)

_WIDTH = 920
# The responsive picture's own width: drawn narrower, so that in a typical output area (about
# 850 px) it is scaled up a little rather than down, and its 11 px text stays readable.
_RESPONSIVE_WIDTH = 760
_ROW_H = 14
_LANE_GAP = 8
_TOP = 26
_CHAR_W = 6.6  # a generous average advance of an 11 px sans-serif character
_LABEL_MIN, _LABEL_MAX = 84, 240
_ARGS_PREVIEW = 160
_RESULT_PREVIEW = 120


@dataclass(frozen=True)
class Palette:
    """The colours a picture is drawn with: plain values, or CSS that follows a theme."""

    background: str
    stripe: str
    grid: str
    text: str
    muted: str
    open_outline: str


#: The static picture's colours (a white page).
STATIC = Palette("#ffffff", "#f6f6f6", "#e6e6e6", "#333", "#777", "#333")


@dataclass(frozen=True)
class _Bar:
    turn_id: str
    kind: str
    label: str
    start: float
    end: float
    finished: bool
    detail: str = ""


def _short(value: Any, limit: int) -> str:
    s = " ".join(str(value).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _call(name: str, arguments: Any) -> str:
    if isinstance(arguments, dict):
        inner = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    else:
        inner = "" if arguments is None else str(arguments)
    return f"{name}({_short(inner, _ARGS_PREVIEW)})"


def _model_detail(data: dict[str, Any]) -> str:
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    parts = []
    if usage:
        parts.append(f"{int(usage.get('input_tokens') or 0):,} tokens in, {int(usage.get('output_tokens') or 0):,} out")
        cached = int(usage.get("cache_read_tokens") or 0)
        if cached:
            parts.append(f"{cached:,} cached")
    if isinstance(data.get("cost_usd"), (int, float)):
        parts.append(f"${data['cost_usd']:.4f}")
    if data.get("stop_reason"):
        parts.append(f"stop: {data['stop_reason']}")
    if data.get("error") or data.get("message") and isinstance(data.get("message"), str):
        parts.append(_short(data.get("error") or data.get("message"), _RESULT_PREVIEW))
    return " · ".join(parts)


def _bars(events: list[AgentEvent]) -> tuple[list[_Bar], dict[str, int], float]:
    """Pairs start and end events into bars; returns them, each turn's counter, and the t0."""
    bars: list[_Bar] = []
    counters: dict[str, int] = {}
    open_model: dict[str, tuple[float, str]] = {}
    open_compaction: dict[str, tuple[float, str]] = {}
    open_tool: dict[str, tuple[str, float, str, str]] = {}
    open_approval: dict[str, tuple[str, float, str, str]] = {}
    for event in events:
        turn = event.turn_id or "-"
        counters.setdefault(turn, event.iteration)
        kind, data = event.type, event.data
        if kind is EventType.ITERATION_START and isinstance(data.get("turn_state"), dict):
            counters[turn] = int(data["turn_state"].get("turn_counter", event.iteration))
        if kind is EventType.LLM_START:
            open_model[turn] = (event.ts, str(data.get("model") or "model"))
        elif kind in _ENDS_MODEL and turn in open_model:
            start, label = open_model.pop(turn)
            detail = _model_detail(data) if kind is EventType.LLM_COMPLETE else f"ended by {kind.value}"
            bars.append(_Bar(turn, "model", label, start, event.ts, True, detail))
        if kind is EventType.COMPACTION_START:
            open_compaction[turn] = (event.ts, f"{data.get('trigger', '')} compaction of {data.get('tokens_before', '?')} tokens")
        elif kind in _ENDS_COMPACTION and turn in open_compaction:
            start, what = open_compaction.pop(turn)
            after = data.get("tokens_after")
            detail = f"{what} → {after} tokens" if after is not None else what
            bars.append(_Bar(turn, "compaction", "compaction", start, event.ts, True, detail.strip()))
        call_id = data.get("call_id")
        if not isinstance(call_id, str):
            continue
        name = str(data.get("name", data.get("tool", "tool")))
        if kind is EventType.TOOL_START:
            open_tool[call_id] = (turn, event.ts, name, _call(name, data.get("arguments")))
        elif kind is EventType.TOOL_RESULT and call_id in open_tool:
            owner, start, name, call = open_tool.pop(call_id)
            error = " (error)" if data.get("is_error") else ""
            outcome = ("failed: " if data.get("is_error") else "returned: ") + _short(data.get("content", ""), _RESULT_PREVIEW)
            bars.append(_Bar(owner, "tool", f"{name}{error}", start, event.ts, True, f"{call}\n{outcome}"))
        elif kind is EventType.APPROVAL_REQUIRED:
            open_approval[call_id] = (turn, event.ts, name, _short(data.get("reason", ""), _RESULT_PREVIEW))
        elif kind is EventType.APPROVAL_DECISION and call_id in open_approval:
            owner, start, name, reason = open_approval.pop(call_id)
            by = f" by {data['decided_by']}" if data.get("decided_by") else ""
            detail = f"decision: {data.get('decision', '?')}{by}" + (f"\nasked because: {reason}" if reason else "")
            bars.append(_Bar(owner, "approval", f"{name}: {data.get('decision', '?')}", start, event.ts, True, detail))
    now = events[-1].ts if events else 0.0
    for turn, (start, label) in open_model.items():
        bars.append(_Bar(turn, "model", label, start, now, False, "still streaming"))
    for turn, (start, what) in open_compaction.items():
        bars.append(_Bar(turn, "compaction", "compaction", start, now, False, what))
    for owner, start, name, call in open_tool.values():
        bars.append(_Bar(owner, "tool", name, start, now, False, call))
    for owner, start, name, reason in open_approval.values():
        bars.append(_Bar(owner, "approval", f"{name}: waiting", start, now, False, f"waiting for a decision\n{reason}".strip()))
    t0 = events[0].ts if events else 0.0
    return bars, counters, t0


def _nice_step(span: float) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving about six ticks."""
    raw = span / 6 if span > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _fit(text: str, width: float, char_w: float = _CHAR_W) -> str:
    """``text`` cut to fit ``width`` pixels, ending in an ellipsis when cut."""
    room = max(1, int(width / char_w))
    return text if len(text) <= room else text[: max(room - 1, 0)] + "…"


class Timeline:
    """A run drawn over time. ``bars`` holds the data; display it, or call ``to_html`` / ``to_svg``.

    Args:
        events: the run's events.
        max_turns: the picture draws at most this many lanes, the latest turns (``bars`` keeps
            every turn), so a session of thousands of turns stays a picture of reasonable size.

    Attributes:
        bars: DataFrame with ``BAR_COLUMNS``: ``lane`` (turn order), ``turn_id``,
            ``turn_counter``, ``sublane``, ``kind`` (model, tool, approval, compaction),
            ``label``, ``start_s`` and ``end_s`` (seconds since the first event), ``finished``,
            ``run_id``, ``agent`` (a sub-agent's id, else None) and ``detail`` (the hover text
            beyond the first line: arguments, tokens, decision).
        duration_s: seconds from the first to the last event.
    """

    def __init__(self, events: list[AgentEvent], *, max_turns: int = 200) -> None:
        bars, counters, t0 = _bars(events)
        self.duration_s = (events[-1].ts - t0) if events else 0.0
        self.max_turns = max_turns
        lanes = {turn: i for i, turn in enumerate(dict.fromkeys(e.turn_id or "-" for e in events))}
        self._lane_start: dict[str, float] = {}
        self._agents: dict[str, str] = {}
        self._runs: dict[str, str] = {}
        run_numbers: dict[tuple[str | None, str], int] = {}
        for e in events:
            turn = e.turn_id or "-"
            self._lane_start.setdefault(turn, e.ts - t0)
            if e.agent_id is not None:  # a sub-agent's turns are labelled with its id
                self._agents.setdefault(turn, e.agent_id)
            self._runs.setdefault(turn, e.run_id)
            key = (e.agent_id, e.run_id)
            if key not in run_numbers:
                run_numbers[key] = 1 + sum(1 for agent, _ in run_numbers if agent == e.agent_id)
        self._run_numbers = {turn: run_numbers.get((self._agents.get(turn), run), 1) for turn, run in self._runs.items()}
        rows: list[dict[str, Any]] = []
        sublane_ends: dict[str, list[float]] = {}
        for bar in sorted(bars, key=lambda b: (lanes.get(b.turn_id, 0), b.start, b.end)):
            ends = sublane_ends.setdefault(bar.turn_id, [])
            sub = next((i for i, end in enumerate(ends) if end <= bar.start), len(ends))
            if sub == len(ends):
                ends.append(bar.end)
            else:
                ends[sub] = bar.end
            rows.append(
                {
                    "lane": lanes.get(bar.turn_id, 0),
                    "turn_id": bar.turn_id,
                    "turn_counter": counters.get(bar.turn_id, 0),
                    "sublane": sub,
                    "kind": bar.kind,
                    "label": bar.label,
                    "start_s": bar.start - t0,
                    "end_s": bar.end - t0,
                    "finished": bar.finished,
                    "run_id": self._runs.get(bar.turn_id),
                    "agent": self._agents.get(bar.turn_id),
                    "detail": bar.detail,
                }
            )
        self.bars = pd.DataFrame(rows, columns=list(BAR_COLUMNS))
        self._lanes = lanes
        self._counters = counters
        self._depth = {turn: max(1, len(ends)) for turn, ends in sublane_ends.items()}

    def __repr__(self) -> str:
        counts = self.bars["kind"].value_counts().to_dict() if len(self.bars) else {}
        parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no bars"
        return f"Timeline({len(self._lanes)} turns, {self.duration_s:.2f} s: {parts})"

    def lane_label(self, turn_id: str) -> str:
        """What a lane is called: the agent (sub-agents only), the run and the turn."""
        lane = self._lanes.get(turn_id, 0)
        parts = [self._agents[turn_id]] if turn_id in self._agents else []
        parts += [f"run {self._run_numbers.get(turn_id, 1)}", f"turn {self._counters.get(turn_id, lane)}"]
        return " · ".join(parts)

    def to_svg(self, palette: Palette = STATIC, *, responsive: bool = False) -> str:
        """The picture as a standalone SVG document.

        Args:
            palette: its colours (``STATIC``; ``html_timeline.THEMED`` follows JupyterLab's theme).
            responsive: fill the width of the page (``width="100%"``, scaled by the viewBox)
                instead of a fixed width in pixels.
        """
        width = _RESPONSIVE_WIDTH if responsive else _WIDTH
        shown = dict(list(self._lanes.items())[-self.max_turns :]) if self.max_turns > 0 else {}
        labels = {turn: self.lane_label(turn) for turn in shown}
        longest = max((len(label) for label in labels.values()), default=0)
        label_w = int(min(_LABEL_MAX, max(_LABEL_MIN, longest * _CHAR_W + 14)))
        origin = min((self._lane_start[turn] for turn in shown), default=0.0)
        span = max(self.duration_s - origin, 1e-3)
        plot_w = width - label_w - 12
        top_margin = _TOP + (16 if len(shown) < len(self._lanes) else 0)
        tops: dict[str, int] = {}
        y = top_margin
        for turn in shown:
            tops[turn] = y
            y += self._depth.get(turn, 1) * _ROW_H + _LANE_GAP
        height = y + 24
        p = palette

        def x(seconds: float) -> float:
            return label_w + (seconds - origin) / span * plot_w

        size = (f'width="100%" style="display:block;max-width:{int(width * 1.5)}px;height:auto"' if responsive
                else f'width="{width}" height="{height}"')
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" {size} viewBox="0 0 {width} {height}" '
            f'preserveAspectRatio="xMinYMin meet" font-family="sans-serif" font-size="11" role="img">',
            f"<title>{escape(repr(self))}</title>",
            f'<rect x="0" y="0" width="{width}" height="{height}" {_fill(p.background)}/>',
        ]
        if len(shown) < len(self._lanes):
            parts.append(
                f'<text x="6" y="14" {_fill(p.muted)}>the last {len(shown)} of {len(self._lanes)} turns '
                "(Timeline.bars has them all)</text>"
            )
        step = _nice_step(span)
        tick = math.ceil(origin / step) * step
        while tick <= origin + span + 1e-9:
            tx = x(tick)
            parts.append(f'<line x1="{tx:.1f}" y1="{top_margin - 6}" x2="{tx:.1f}" y2="{y}" {_stroke(p.grid)}/>')
            parts.append(f'<text x="{tx:.1f}" y="{top_margin - 10}" text-anchor="middle" {_fill(p.muted)}>{tick:g}s</text>')
            tick += step
        for turn, lane in shown.items():
            top = tops[turn]
            lane_h = self._depth.get(turn, 1) * _ROW_H
            if lane % 2:
                parts.append(f'<rect x="0" y="{top - 3}" width="{width}" height="{lane_h + 6}" {_fill(p.stripe)}/>')
            label = labels[turn]
            parts.append(f'<text class="lane-label" x="6" y="{top + 11}" {_fill(p.text)}>'
                         f"{escape(_fit(label, label_w - 12))}<title>{escape(label)}</title></text>")
        for bar in self.bars.itertuples(index=False):
            if bar.turn_id not in tops:
                continue
            top = tops[bar.turn_id] + bar.sublane * _ROW_H + 1
            x0 = x(bar.start_s)
            w = max(1.5, x(bar.end_s) - x0)
            dash = "" if bar.finished else f' {_stroke(p.open_outline)} stroke-dasharray="3,2" fill-opacity="0.55"'
            what = "" if bar.finished else ", not finished"
            tip = f"{bar.kind}: {bar.label} ({bar.end_s - bar.start_s:.3f} s{what})"
            if bar.detail:
                tip += f"\n{bar.detail}"
            tip += f"\n{labels[bar.turn_id]}"
            parts.append(
                f'<rect class="bar" x="{x0:.1f}" y="{top}" width="{w:.1f}" height="{_ROW_H - 3}" rx="2" '
                f'fill="{COLORS[bar.kind]}"{dash}><title>{escape(tip)}</title></rect>'
            )
            if w > 40:
                ink = "#fff" if bar.finished else p.text
                parts.append(
                    f'<text x="{x0 + 3:.1f}" y="{top + 9}" {_fill(ink)} font-size="9" pointer-events="none">'
                    f"{escape(_fit(bar.label, w - 6, 5.4))}</text>"
                )
        lx = label_w
        for kind, color in COLORS.items():
            parts.append(f'<rect x="{lx}" y="{height - 16}" width="10" height="10" fill="{color}"/>')
            parts.append(f'<text x="{lx + 14}" y="{height - 7}" {_fill(p.text)}>{kind}</text>')
            lx += 90
        if not self._lanes:
            parts.append(f'<text x="{label_w}" y="{_TOP + 10}" {_fill(p.muted)}>no events yet</text>')
        parts.append("</svg>")
        return "".join(parts)

    def to_html(self) -> str:
        """The picture as an HTML fragment that fills the output's width and follows the theme."""
        from agent_kernel.journal._html_timeline import render_html

        return render_html(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        # HTML for live front-ends; the SVG image for those that show images only (nbconvert's
        # LaTeX/PDF, viewers that strip HTML), and text for the rest.
        return {"text/html": self.to_html(), "image/svg+xml": self.to_svg(), "text/plain": repr(self)}

    def _repr_svg_(self) -> str:
        return self.to_svg()

    def to_png(self, *, scale: float = 2.0) -> bytes:
        """The picture (``to_svg``) as PNG bytes, ``scale`` times its size in pixels.

        Raises:
            UserError: resvg-py is not installed.
        """
        try:
            import resvg_py
        except ImportError:
            from agent_kernel.errors import UserError

            raise UserError("Drawing the timeline as a PNG needs resvg-py: pip install resvg-py "
                            "(or pip install 'agent-kernel[lab]'). The HTML and SVG forms need nothing.") from None
        fonts = _fallback_fonts()
        return bytes(resvg_py.svg_to_bytes(svg_string=self.to_svg(), zoom=scale, background="white",
                                           font_files=fonts or None, sans_serif_family="DejaVu Sans"))

    def picture(self, *, scale: float = 2.0) -> TimelinePicture:
        """The timeline as a PNG image for a notebook: it shows wherever images do, including an
        untrusted notebook in JupyterLab, which hides the HTML form's inline SVG.

        Example:
            >>> timeline(agent).picture()  # doctest: +SKIP
        """
        return TimelinePicture(self.to_png(scale=scale), _WIDTH, repr(self))

    def save(self, path: str) -> None:
        """Writes the SVG to ``path`` (``.html``: the themed, responsive HTML fragment)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_html() if str(path).endswith((".html", ".htm")) else self.to_svg())


@dataclass(frozen=True)
class TimelinePicture:
    """A timeline drawn as a PNG: displays as ``image/png`` at ``width`` CSS pixels.

    Attributes:
        png: the image's bytes.
        width: the width it is shown at (the image holds more pixels, for sharp screens).
        text: what ``repr`` says (the timeline's one-line summary).
    """

    png: bytes
    width: int
    text: str

    def _repr_png_(self) -> tuple[bytes, dict[str, int]]:
        return self.png, {"width": self.width}

    def __repr__(self) -> str:
        return self.text

    def save(self, path: str) -> None:
        """Writes the PNG to ``path``."""
        Path(path).write_bytes(self.png)


def _fallback_fonts() -> list[str]:
    """DejaVu Sans from matplotlib's own data, when matplotlib is installed (found without
    importing it), so text is drawn on a system with no fonts too."""
    spec = importlib.util.find_spec("matplotlib")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        font = Path(folder) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if font.is_file():
            return [str(font)]
    return []


def _fill(color: str) -> str:
    """A fill: an attribute for a plain colour, a style for CSS (``var(...)`` needs CSS)."""
    return f'style="fill:{color}"' if color.startswith("var(") else f'fill="{color}"'


def _stroke(color: str) -> str:
    return f'style="stroke:{color}"' if color.startswith("var(") else f'stroke="{color}"'


def timeline(source: Any, *, max_turns: int = 200) -> Timeline:
    """The timeline of a run: ``source`` is a journal path, a ``Journal``, events, or an agent.

    ``max_turns`` bounds the lanes drawn (the latest turns); ``Timeline.bars`` keeps them all.

    Example:
        >>> timeline(agent)  # doctest: +SKIP
        Timeline(3 turns, 4.20 s: 3 model, 4 tool, 1 approval)
    """
    return Timeline(source_events(source), max_turns=max_turns)
