"""journal.diff — two runs side by side, turn by turn: where they part and how they differ.

``diff_runs(a, b)`` lines up the turns of the top-level agent of two sessions (journals, agents
or event lists) in the order they were taken. A fork (``Agent.fork``) starts with its original's
events before the fork point, so a fork and its original line up turn for turn and part at the
turn the fork ran again.

Two turns are the same when the model was sent the same replacement of its request (a
``before_llm_call`` hook's, from ``llm_start.sent``; "" where no hook replaced it), the assistant
said the same text, made the same tool calls with the same arguments, and got the same results; tokens, cost and duration are shown, not compared
(they differ between any two calls).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agent_kernel.errors import JournalError
from agent_kernel.events._event import AgentEvent
from agent_kernel.journal._reader import read_records

# Per-token events say nothing llm_complete does not: skipping them keeps a large journal fast.
_SKIP = ("text_delta", "thinking_delta", "tool_call_delta", "tool_progress")

_COMPARED = ("sent", "text", "tool_calls", "results")


@dataclass
class TurnSummary:
    """What one turn of the top-level agent did.

    Attributes:
        turn: the turn's position in its session (0 for the first turn of the first run).
        turn_id: its ``TurnState.turn_id``.
        iteration: its turn counter within its run.
        sent: what a ``before_llm_call`` hook sent in place of the turn's request, as text (the
            messages it put in, and the system prompt when it changed it); "" when none did.
        text: what the assistant said (the last response of the turn).
        tool_calls: ``name(arguments as JSON)`` for each call, in the model's order.
        results: each call's result text, in the same order.
        tokens: input plus output tokens of the turn's model calls.
        cost_usd: their cost (None when unknown).
        duration_s: from the turn's start to the next turn's start or the run's end.
    """

    turn: int
    turn_id: str | None
    iteration: int
    sent: str = ""
    text: str = ""
    tool_calls: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float | None = 0.0
    duration_s: float | None = None
    _start: float = 0.0

    def key(self) -> tuple[Any, ...]:
        """What two turns must share to be the same."""
        return (self.sent, self.text, tuple(self.tool_calls), tuple(self.results))


def _records(source: Any) -> Iterator[tuple[str, str | None, float, str | None, int, dict[str, Any]]]:
    """(type, agent_id, ts, turn_id, iteration, data) of each event of ``source``."""
    if isinstance(source, (str, os.PathLike)) or hasattr(source, "path") and not hasattr(source, "events"):
        path = source if isinstance(source, (str, os.PathLike)) else source.path
        if os.path.isdir(path):
            raise JournalError(f"diff_runs compares two sessions, and {os.fspath(path)!r} is a folder; pass one journal file in it.")
        if hasattr(source, "flush"):
            source.flush()  # a Journal still being written: what it holds so far
        _, records = read_records(path, skip_types=_SKIP)
        for r in records:
            yield r["type"], r.get("agent_id"), r["ts"], r.get("turn_id"), r.get("iteration", 0), r.get("data") or {}
        return
    events: Iterable[AgentEvent] = source.events if hasattr(source, "events") else source
    for e in events if isinstance(events, Iterable) else [None]:
        if not isinstance(e, AgentEvent):
            raise JournalError(f"diff_runs cannot read a session from {type(source).__name__}; pass a journal path, a "
                               "Journal, an Agent, or a list of its events.")
        yield e.type.value, e.agent_id, e.ts, e.turn_id, e.iteration, e.data


def _sent_text(sent: dict[str, Any]) -> str:
    """A replaced request (``llm_start.sent``) as one text: the system prompt it set, then the
    text of each message it put in (tool results by their content)."""
    parts = [f"system: {sent['system']}"] if isinstance(sent.get("system"), str) else []
    for message in sent.get("messages") or ():
        if not isinstance(message, dict):
            continue
        texts = []
        for block in message.get("content") or ():
            if isinstance(block, dict):
                content = block.get("text", block.get("content", ""))
                texts.append(content if isinstance(content, str) else json.dumps(content, default=str))
        parts.append(f"{message.get('role')}: {' '.join(texts)}")
    return "\n".join(parts)


def turn_summaries(source: Any) -> list[TurnSummary]:
    """One ``TurnSummary`` per turn of the top-level agent of ``source``.

    Args:
        source: a journal path, a ``Journal``, an ``Agent`` or a sequence of ``AgentEvent``.
    """
    turns: list[TurnSummary] = []
    current: TurnSummary | None = None
    calls: dict[str, int] = {}
    for kind, agent_id, ts, turn_id, iteration, data in _records(source):
        if agent_id is not None:
            continue  # a sub-agent's turns are its own
        if kind == "iteration_start":
            if current is not None and current.duration_s is None:
                current.duration_s = ts - current._start
            current = TurnSummary(len(turns), turn_id, iteration, _start=ts)
            turns.append(current)
            calls = {}
        elif current is None:
            continue
        elif kind == "llm_start" and isinstance(data.get("sent"), dict):
            current.sent = _sent_text(data["sent"])
        elif kind == "llm_complete":
            message = data.get("message") or {}
            blocks = message.get("content") or []
            current.text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    calls[str(b.get("id"))] = len(current.tool_calls)
                    current.tool_calls.append(f"{b.get('name')}({json.dumps(b.get('input', {}), sort_keys=True, default=str)})")
                    current.results.append("")
            usage = data.get("usage") or {}
            current.tokens += int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
            cost = data.get("cost_usd")
            current.cost_usd = None if cost is None or current.cost_usd is None else current.cost_usd + cost
        elif kind == "tool_result":
            index = calls.get(str(data.get("call_id")))
            if index is not None:
                content = data.get("content", "")
                current.results[index] = content if isinstance(content, str) else json.dumps(content, default=str)
        elif kind == "run_finish":
            current.duration_s = ts - current._start
            current = None
    return turns


def diff_runs(a: Any, b: Any, *, all_turns: bool = False) -> Any:
    """Two sessions side by side, turn by turn, from the first turn where they differ.

    Args:
        a, b: journal paths, ``Journal`` objects, agents or sequences of ``AgentEvent``.
        all_turns: also show the turns before the first divergence (the same on both sides).

    Returns:
        A pandas DataFrame, one row per turn position, indexed by ``turn``: ``same`` (the turn
        did the same on both sides), then ``sent`` (what a hook sent in place of the request),
        ``text``, ``tool_calls``, ``results``, ``tokens``,
        ``cost_usd`` and ``duration_s`` for side ``a`` and side ``b`` (``a_text``, ``b_text``,
        ...; None where a side has no such turn). ``df.attrs["first_divergence"]`` is the first
        turn that differs (None when the runs agree throughout).

    Example:
        >>> fork = agent.fork(at=1, model="openai:gpt-4.1")  # doctest: +SKIP
        >>> await fork.continue_run()  # doctest: +SKIP
        >>> diff_runs(agent, fork)  # doctest: +SKIP
    """
    import pandas as pd

    left, right = turn_summaries(a), turn_summaries(b)
    count = max(len(left), len(right))
    first = next((i for i in range(count) if i >= len(left) or i >= len(right) or left[i].key() != right[i].key()), None)
    start = 0 if all_turns else (count if first is None else first)
    columns = ["same"] + [f"{side}_{name}" for name in (*_COMPARED, "tokens", "cost_usd", "duration_s") for side in ("a", "b")]
    rows: list[list[Any]] = []
    for i in range(start, count):
        one = left[i] if i < len(left) else None
        two = right[i] if i < len(right) else None
        row: list[Any] = [one is not None and two is not None and one.key() == two.key()]
        for name in (*_COMPARED, "tokens", "cost_usd", "duration_s"):
            row += [getattr(one, name) if one is not None else None, getattr(two, name) if two is not None else None]
        rows.append(row)
    index = pd.Index(range(start, count), name="turn")
    # Object columns keep None as None where a side has no such turn (pandas would make it NaN).
    df = pd.DataFrame({name: pd.Series([row[i] for row in rows], index=index, dtype=object) for i, name in enumerate(columns)}, index=index)
    df["same"] = df["same"].astype(bool)
    df.attrs["first_divergence"] = first
    return df
