"""journal.svg_timeline — a picture of a run over time: one lane per turn, bars for what took time.

``timeline(source)`` returns a ``Timeline``: its ``bars`` are a DataFrame, and it renders as a
self-contained SVG (``_repr_svg_``: no script, no external asset), so it shows in a live
notebook, in nbconvert HTML, on GitHub and in any browser. Hovering a bar shows its SVG
``<title>`` (what, how long).

Bars: model streaming (``llm_start`` → ``llm_complete``), tool executions (``tool_start`` →
``tool_result``), approval waits (``approval_required`` → ``approval_decision``) and
compactions (``compaction_start`` → ``compaction_complete``). Bars that overlap in one turn,
such as parallel tool calls, are stacked in sub-lanes. A bar with no end yet (a run in progress,
or killed) reaches the last event and is drawn dashed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd

from ..events import AgentEvent, EventType
from .frames import source_events

__all__ = ["BAR_COLUMNS", "Timeline", "timeline"]

BAR_COLUMNS = ("lane", "turn_id", "turn_counter", "sublane", "kind", "label", "start_s", "end_s", "finished")
COLORS = {"model": "#4c78a8", "tool": "#f58518", "approval": "#e45756", "compaction": "#54a24b"}
_ENDS_MODEL = (EventType.LLM_COMPLETE, EventType.ERROR, EventType.RETRY, EventType.CANCELLED)
_ENDS_COMPACTION = (EventType.COMPACTION_COMPLETE, EventType.ERROR, EventType.CANCELLED)

_WIDTH = 920
_LABEL_W = 84
_ROW_H = 14
_LANE_GAP = 8
_TOP = 26


@dataclass(frozen=True)
class _Bar:
    turn_id: str
    kind: str
    label: str
    start: float
    end: float
    finished: bool


def _bars(events: list[AgentEvent]) -> tuple[list[_Bar], dict[str, int], float]:
    """Pairs start and end events into bars; returns them, each turn's counter, and the t0."""
    bars: list[_Bar] = []
    counters: dict[str, int] = {}
    open_model: dict[str, tuple[float, str]] = {}
    open_compaction: dict[str, float] = {}
    open_tool: dict[str, tuple[str, float, str]] = {}
    open_approval: dict[str, tuple[str, float, str]] = {}
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
            bars.append(_Bar(turn, "model", label, start, event.ts, True))
        if kind is EventType.COMPACTION_START:
            open_compaction[turn] = event.ts
        elif kind in _ENDS_COMPACTION and turn in open_compaction:
            bars.append(_Bar(turn, "compaction", "compaction", open_compaction.pop(turn), event.ts, True))
        call_id = data.get("call_id")
        if not isinstance(call_id, str):
            continue
        name = str(data.get("name", data.get("tool", "tool")))
        if kind is EventType.TOOL_START:
            open_tool[call_id] = (turn, event.ts, name)
        elif kind is EventType.TOOL_RESULT and call_id in open_tool:
            owner, start, name = open_tool.pop(call_id)
            error = " (error)" if data.get("is_error") else ""
            bars.append(_Bar(owner, "tool", f"{name}{error}", start, event.ts, True))
        elif kind is EventType.APPROVAL_REQUIRED:
            open_approval[call_id] = (turn, event.ts, name)
        elif kind is EventType.APPROVAL_DECISION and call_id in open_approval:
            owner, start, name = open_approval.pop(call_id)
            bars.append(_Bar(owner, "approval", f"{name}: {data.get('decision', '?')}", start, event.ts, True))
    now = events[-1].ts if events else 0.0
    for turn, (start, label) in open_model.items():
        bars.append(_Bar(turn, "model", label, start, now, False))
    for turn, start in open_compaction.items():
        bars.append(_Bar(turn, "compaction", "compaction", start, now, False))
    for owner, start, name in open_tool.values():
        bars.append(_Bar(owner, "tool", name, start, now, False))
    for owner, start, name in open_approval.values():
        bars.append(_Bar(owner, "approval", f"{name}: waiting", start, now, False))
    t0 = events[0].ts if events else 0.0
    return bars, counters, t0


def _nice_step(span: float) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving about six ticks."""
    raw = span / 6 if span > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


class Timeline:
    """A run drawn over time. ``bars`` holds the data; display it, or call ``to_svg``.

    Args:
        events: the run's events.
        max_turns: the picture draws at most this many lanes, the latest turns (``bars`` keeps
            every turn), so a session of thousands of turns stays a picture of reasonable size.

    Attributes:
        bars: DataFrame with ``BAR_COLUMNS``: ``lane`` (turn order), ``turn_id``,
            ``turn_counter``, ``sublane``, ``kind`` (model, tool, approval, compaction),
            ``label``, ``start_s`` and ``end_s`` (seconds since the first event), ``finished``.
        duration_s: seconds from the first to the last event.
    """

    def __init__(self, events: list[AgentEvent], *, max_turns: int = 200) -> None:
        bars, counters, t0 = _bars(events)
        self.duration_s = (events[-1].ts - t0) if events else 0.0
        self.max_turns = max_turns
        lanes = {turn: i for i, turn in enumerate(dict.fromkeys(e.turn_id or "-" for e in events))}
        self._lane_start: dict[str, float] = {}
        for e in events:
            self._lane_start.setdefault(e.turn_id or "-", e.ts - t0)
        self._agents: dict[str, str] = {}
        for e in events:  # a sub-agent's turns are labelled with its id
            if e.agent_id is not None:
                self._agents.setdefault(e.turn_id or "-", e.agent_id)
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

    def to_svg(self) -> str:
        """The picture as a standalone SVG document."""
        shown = dict(list(self._lanes.items())[-self.max_turns :]) if self.max_turns > 0 else {}
        origin = min((self._lane_start[turn] for turn in shown), default=0.0)
        span = max(self.duration_s - origin, 1e-3)
        plot_w = _WIDTH - _LABEL_W - 12
        top_margin = _TOP + (16 if len(shown) < len(self._lanes) else 0)
        tops: dict[str, int] = {}
        y = top_margin
        for turn in shown:
            tops[turn] = y
            y += self._depth.get(turn, 1) * _ROW_H + _LANE_GAP
        height = y + 24

        def x(seconds: float) -> float:
            return _LABEL_W + (seconds - origin) / span * plot_w

        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
            f'viewBox="0 0 {_WIDTH} {height}" font-family="sans-serif" font-size="11" role="img">',
            f"<title>{escape(repr(self))}</title>",
            f'<rect x="0" y="0" width="{_WIDTH}" height="{height}" fill="#ffffff"/>',
        ]
        if len(shown) < len(self._lanes):
            parts.append(
                f'<text x="6" y="14" fill="#777">the last {len(shown)} of {len(self._lanes)} turns '
                "(Timeline.bars has them all)</text>"
            )
        step = _nice_step(span)
        tick = math.ceil(origin / step) * step
        while tick <= origin + span + 1e-9:
            tx = x(tick)
            parts.append(f'<line x1="{tx:.1f}" y1="{top_margin - 6}" x2="{tx:.1f}" y2="{y}" stroke="#e6e6e6"/>')
            parts.append(f'<text x="{tx:.1f}" y="{top_margin - 10}" text-anchor="middle" fill="#555">{tick:g}s</text>')
            tick += step
        for turn, lane in shown.items():
            top = tops[turn]
            lane_h = self._depth.get(turn, 1) * _ROW_H
            if lane % 2:
                parts.append(f'<rect x="0" y="{top - 3}" width="{_WIDTH}" height="{lane_h + 6}" fill="#f6f6f6"/>')
            who = self._agents.get(turn)
            label = f"{who}: turn {self._counters.get(turn, lane)}" if who else f"turn {self._counters.get(turn, lane)}"
            parts.append(f'<text x="6" y="{top + 11}" fill="#333">{escape(label[:14])}<title>{escape(label)}</title></text>')
        for bar in self.bars.itertuples(index=False):
            if bar.turn_id not in tops:
                continue
            top = tops[bar.turn_id] + bar.sublane * _ROW_H + 1
            x0 = x(bar.start_s)
            w = max(1.5, x(bar.end_s) - x0)
            dash = "" if bar.finished else ' stroke="#333" stroke-dasharray="3,2" fill-opacity="0.55"'
            what = "" if bar.finished else ", not finished"
            tip = f"{bar.kind}: {bar.label} ({bar.end_s - bar.start_s:.3f} s{what})"
            parts.append(
                f'<rect x="{x0:.1f}" y="{top}" width="{w:.1f}" height="{_ROW_H - 3}" rx="2" '
                f'fill="{COLORS[bar.kind]}"{dash}><title>{escape(tip)}</title></rect>'
            )
            if w > 40:
                ink = "#fff" if bar.finished else "#222"
                parts.append(
                    f'<text x="{x0 + 3:.1f}" y="{top + 9}" fill="{ink}" font-size="9" pointer-events="none">'
                    f"{escape(bar.label[: int(w / 6)])}</text>"
                )
        lx = _LABEL_W
        for kind, color in COLORS.items():
            parts.append(f'<rect x="{lx}" y="{height - 16}" width="10" height="10" fill="{color}"/>')
            parts.append(f'<text x="{lx + 14}" y="{height - 7}" fill="#333">{kind}</text>')
            lx += 90
        if not self._lanes:
            parts.append(f'<text x="{_LABEL_W}" y="{_TOP + 10}" fill="#777">no events yet</text>')
        parts.append("</svg>")
        return "".join(parts)

    def _repr_svg_(self) -> str:
        return self.to_svg()

    def save(self, path: str) -> None:
        """Writes the SVG to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_svg())


def timeline(source: Any, *, max_turns: int = 200) -> Timeline:
    """The timeline of a run: ``source`` is a journal path, a ``Journal``, events, or an agent.

    ``max_turns`` bounds the lanes drawn (the latest turns); ``Timeline.bars`` keeps them all.

    Example:
        >>> timeline(agent)  # doctest: +SKIP
        Timeline(3 turns, 4.20 s: 3 model, 4 tool, 1 approval)
    """
    return Timeline(source_events(source), max_turns=max_turns)
