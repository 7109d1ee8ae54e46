"""jupyter.summary — the static summary of a finished run, as HTML, Markdown and plain text.

The live view needs a running kernel (or saved widget state); this summary does not. Displayed
when a run ends, it keeps the answer, the tool calls, the sub-agent runs and the usage visible in
nbconvert output, on GitHub, under nbval and in a notebook saved without widget state.

Sub-agents are listed as a tree (a sub-agent under the one that started it, siblings in the
order they started) and numbered by their place in it (``1``, ``1.1``, ``2``), never by their ids.

``text/plain`` is deterministic for a deterministic (scripted) run: no timestamps, durations,
ids or memory addresses, so nbval can compare it. Timings appear only in the HTML and Markdown.
Model output is never executed: the HTML is rendered from Markdown with raw HTML escaped and only
http(s) and mailto links kept.
"""

from __future__ import annotations

import decimal
import functools
import html
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agent_kernel.events._event import AgentEvent
from agent_kernel.jupyter._items import SubagentCard, ToolCard
from agent_kernel.jupyter._transcript import Transcript

#: Longest argument line shown per tool call (characters).
ARGS_SHORT = 80
#: Longest result preview shown per sub-agent (characters).
RESULT_SHORT = 100
_SAFE_LINK = re.compile(r"^(https?://|mailto:)", re.IGNORECASE)


@dataclass(frozen=True)
class ToolCallLine:
    """One tool call as the summary lists it."""

    name: str
    arguments: str
    status: str
    duration_s: float | None
    reason: str | None


@dataclass(frozen=True)
class SubagentLine:
    """One sub-agent run as the summary lists it.

    ``number`` is its place in the tree of sub-agents (``"1"``, ``"1.2"``), ``depth`` how far
    below the top-level agent it ran (0: started by it), ``result`` a one-line preview of its
    answer (or of its error).
    """

    number: str
    depth: int
    name: str
    task: str | None
    status: str
    result: str
    tool_calls: tuple[ToolCallLine, ...]
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    duration_s: float | None

    @property
    def label(self) -> str:
        """Its name, with the crew task it worked on if any."""
        return f"{self.name} [{self.task}]" if self.task else self.name

    @property
    def outcome(self) -> str:
        """Its status, with the result preview when there is one."""
        return f"{self.status}: {self.result}" if self.result else self.status


@dataclass(frozen=True)
class RunSummary:
    """What a run produced: its answer, tool calls and usage, displayable in any front-end.

    Example:
        >>> summary = RunSummary.from_events(events)  # doctest: +SKIP
        >>> display(summary)  # doctest: +SKIP
    """

    answer: str
    tool_calls: tuple[ToolCallLine, ...]
    phase: str
    reason: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    turns: int
    model: str | None
    duration_s: float | None
    subagents: tuple[SubagentLine, ...] = ()

    @classmethod
    def from_transcript(cls, transcript: Transcript) -> RunSummary:
        """The summary of the run folded into ``transcript`` (finished or not)."""
        status = transcript.status
        return cls(
            answer=transcript.final_text,
            tool_calls=tuple(_line(card) for card in transcript.tool_cards if card.agent is None),
            phase=status.phase,
            reason=status.reason,
            input_tokens=status.input_tokens,
            output_tokens=status.output_tokens,
            cost_usd=status.cost_usd,
            turns=transcript.turns,
            model=status.model,
            duration_s=transcript.elapsed(),
            subagents=_subagent_lines(transcript),
        )

    @classmethod
    def from_events(cls, events: Iterable[AgentEvent]) -> RunSummary:
        """The summary of a run given its events (e.g. a run's recorded stream or journal)."""
        transcript = Transcript()
        for event in events:
            transcript.apply(event)
        return cls.from_transcript(transcript)

    @classmethod
    def from_result(cls, result: Any) -> RunSummary:
        """The summary of a ``RunResult`` (anything with the run's ``events``)."""
        return cls.from_events(result.events)

    # -- renderings ------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """Plain text, deterministic for a deterministic run (no timings, ids or addresses)."""
        lines = ["Answer:", self.answer.strip() or "(no answer)", ""]
        lines.append(f"Tool calls ({len(self.tool_calls)}):" if self.tool_calls
                     else "Tool calls: none")
        for n, call in enumerate(self.tool_calls, 1):
            outcome = call.status + (f": {call.reason}" if call.reason else "")
            lines.append(f"  {n}. {call.name}({call.arguments}) - {outcome}")
        if self.subagents:
            lines += ["", f"Sub-agents ({len(self.subagents)}):"]
        for sub in self.subagents:
            indent = "  " * (sub.depth + 1)
            lines.append(f"{indent}{sub.number}. {sub.label} - {sub.outcome}")
            for call in sub.tool_calls:
                outcome = call.status + (f": {call.reason}" if call.reason else "")
                lines.append(f"{indent}   - {call.name}({call.arguments}) - {outcome}")
        lines += ["", "Usage: " + " · ".join(self._usage_parts(timed=False))]
        return "\n".join(lines)

    @property
    def markdown(self) -> str:
        """Markdown: the answer as written, a table of tool calls, the usage with timings."""
        parts = ["**Answer**", "", self.answer.strip() or "_(no answer)_", ""]
        if self.tool_calls:
            parts += ["**Tool calls**", "", "| # | Tool | Arguments | Status | Duration |",
                      "|---|---|---|---|---|"]
            for n, call in enumerate(self.tool_calls, 1):
                outcome = call.status + (f": {call.reason}" if call.reason else "")
                parts.append(f"| {n} | {_md_cell(call.name)} | {_md_code(call.arguments)} | "
                             f"{_md_cell(outcome)} | {_duration(call.duration_s)} |")
            parts.append("")
        if self.subagents:
            parts += ["**Sub-agents**", "", "| # | Sub-agent | Status | Tool calls | Result | Usage | "
                      "Duration |", "|---|---|---|---|---|---|---|"]
            for sub in self.subagents:
                parts.append(f"| {sub.number} | {_md_cell(sub.label)} | {_md_cell(sub.status)} | "
                             f"{_md_cell(_call_names(sub))} | {_md_cell(sub.result or '–')} | "
                             f"{_sub_usage(sub)} | {_duration(sub.duration_s)} |")
            parts.append("")
        parts.append("**Usage** " + " · ".join(self._usage_parts(timed=True)))
        return "\n".join(parts)

    @property
    def html(self) -> str:
        """HTML with no script: the answer rendered from Markdown, tool calls, usage."""
        esc = html.escape
        out = ['<div class="agent-kernel-summary">',
               '<div><strong>Answer</strong></div>',
               markdown_to_html(self.answer) if self.answer.strip() else "<p><em>(no answer)</em></p>"]
        if self.tool_calls:
            out.append("<div><strong>Tool calls</strong></div>")
            out.append("<table><thead><tr><th>#</th><th>Tool</th><th>Arguments</th>"
                       "<th>Status</th><th>Duration</th></tr></thead><tbody>")
            for n, call in enumerate(self.tool_calls, 1):
                outcome = call.status + (f": {call.reason}" if call.reason else "")
                out.append(f"<tr><td>{n}</td><td>{esc(call.name)}</td>"
                           f"<td><code>{esc(call.arguments)}</code></td><td>{esc(outcome)}</td>"
                           f"<td>{_duration(call.duration_s)}</td></tr>")
            out.append("</tbody></table>")
        if self.subagents:
            out.append("<div><strong>Sub-agents</strong></div>")
            out.append("<table><thead><tr><th>#</th><th>Sub-agent</th><th>Status</th>"
                       "<th>Tool calls</th><th>Result</th><th>Usage</th><th>Duration</th></tr>"
                       "</thead><tbody>")
            for sub in self.subagents:
                out.append(f"<tr><td>{sub.number}</td><td>{esc(sub.label)}</td>"
                           f"<td>{esc(sub.status)}</td><td>{esc(_call_names(sub))}</td>"
                           f"<td>{esc(sub.result or '–')}</td><td>{esc(_sub_usage(sub))}</td>"
                           f"<td>{_duration(sub.duration_s)}</td></tr>")
            out.append("</tbody></table>")
        out.append(f"<p><strong>Usage</strong> {esc(' · '.join(self._usage_parts(timed=True)))}</p>")
        out.append("</div>")
        return "\n".join(out)

    def _usage_parts(self, *, timed: bool) -> list[str]:
        parts = [f"{self.input_tokens:,} tokens in", f"{self.output_tokens:,} out",
                 format_cost(self.cost_usd),
                 f"{self.turns} turn{'s' if self.turns != 1 else ''}"]
        if self.model:
            parts.append(self.model)
        if timed:
            parts.append(_duration(self.duration_s))
        ended = self.reason or self.phase
        parts.append(f"ended: {ended}")
        return parts

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """The three renderings, for IPython's ``display``."""
        return {"text/plain": self.text, "text/markdown": self.markdown, "text/html": self.html}

    def __repr__(self) -> str:
        """The plain-text rendering."""
        return self.text


def _line(card: ToolCard) -> ToolCallLine:
    if card.raw_arguments is not None:
        args = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False, default=str)}"
                         for key, value in card.raw_arguments.items())
    else:
        args = " ".join(card.arguments.split())
    if len(args) > ARGS_SHORT:
        args = args[: ARGS_SHORT - 1] + "…"
    reason = card.reason if card.status == "rejected" else None
    return ToolCallLine(card.name, args, card.status, card.duration_s, reason)


def _subagent_lines(transcript: Transcript) -> tuple[SubagentLine, ...]:
    """The sub-agent runs as a tree, depth first, siblings in the order they started."""
    cards = transcript.subagents
    known = {card.agent_id for card in cards}
    children: dict[str | None, list[SubagentCard]] = {}
    for card in cards:
        # One whose parent never appeared (a journal read from the middle) is listed at the top.
        children.setdefault(card.agent if card.agent in known else None, []).append(card)
    calls: dict[str | None, list[ToolCard]] = {}
    for tool in transcript.tool_cards:
        calls.setdefault(tool.agent, []).append(tool)
    lines: list[SubagentLine] = []

    def walk(parent: str | None, prefix: str, depth: int) -> None:
        for n, card in enumerate(children.get(parent, ()), 1):
            number = f"{prefix}{n}"
            lines.append(_subagent_line(card, number, depth, calls.get(card.agent_id, [])))
            walk(card.agent_id, number + ".", depth + 1)

    walk(None, "", 0)
    return tuple(lines)


def _subagent_line(card: SubagentCard, number: str, depth: int,
                   calls: list[ToolCard]) -> SubagentLine:
    said = card.error if card.status == "error" and card.error else (card.result or "")
    return SubagentLine(number, depth, card.name, card.task, card.status, _one_line(said),
                        tuple(_line(call) for call in calls), card.input_tokens,
                        card.output_tokens, card.cost_usd, card.duration_s)


def _one_line(text: str) -> str:
    """The first non-blank line of ``text``, shortened; ``…`` marks anything left out."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = " ".join(lines[0].split())
    if len(first) > RESULT_SHORT:
        return first[: RESULT_SHORT - 1] + "…"
    return first + (" …" if len(lines) > 1 else "")


def _call_names(sub: SubagentLine) -> str:
    return ", ".join(call.name for call in sub.tool_calls) or "–"


def _sub_usage(sub: SubagentLine) -> str:
    if sub.input_tokens is None and sub.output_tokens is None:
        return "–"
    return f"{sub.input_tokens or 0:,} in · {sub.output_tokens or 0:,} out · {format_cost(sub.cost_usd)}"


def format_cost(cost: float | None) -> str:
    """The one cost format of every surface: ``$0.0123``, and ``—`` when unknown (never
    ``$0.0000`` for an unknown cost)."""
    return "—" if cost is None else f"${cost:.4f}"


def one_decimal(value: float) -> str:
    """``value`` with one decimal, rounded as JavaScript's ``toFixed(1)`` rounds (half away from
    zero on the exact binary value), so the live view and the static renderings agree."""
    exact = decimal.Decimal(value).quantize(decimal.Decimal("0.1"), rounding=decimal.ROUND_HALF_UP)
    return f"{exact:.1f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{one_decimal(seconds)} s"
    minutes, rest = divmod(math.floor(seconds + 0.5), 60)  # Math.round, as the live view
    return f"{minutes} min {rest:02d} s"


def _md_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _md_code(text: str) -> str:
    text = _md_cell(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


@functools.cache
def _renderer() -> Callable[[str], str]:
    import mistune  # imported on first use: rendering a summary is rare, imports are not

    class SafeRenderer(mistune.HTMLRenderer):
        """Escapes raw HTML; keeps only http(s)/mailto links; shows images as links."""

        def link(self, text: str, url: str, title: str | None = None) -> str:
            if not _SAFE_LINK.match(url.strip()):
                return text
            return (f'<a href="{self.safe_url(url)}" target="_blank" '
                    f'rel="noopener noreferrer nofollow">{text}</a>')

        def image(self, text: str, url: str, title: str | None = None) -> str:
            return self.link(text or url, url, title)

    markdown = mistune.create_markdown(escape=True, renderer=SafeRenderer(escape=True),
                                       plugins=["strikethrough", "table", "url"])
    return lambda text: str(markdown(text))


def markdown_to_html(text: str) -> str:
    """Markdown to HTML with raw HTML escaped and only http(s)/mailto links (never script)."""
    return _renderer()(text)
