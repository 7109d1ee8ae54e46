"""journal.frames — pandas DataFrames built from a journal (events, turns, tool calls, messages, usage).

Every function takes a *source*: a journal path, a ``Journal``, a list of ``AgentEvent`` (or of
their dicts), or any object with an ``.events`` list (a live agent: the list is copied when the
function is called, so a run still in progress gives the events so far; once an agent's memory
let earlier events go, its journal is read instead, see ``journal.event_log``). Column names and dtypes
are fixed and listed in each docstring; ``string`` means ``pd.StringDtype("pyarrow")`` (missing
values are ``pd.NA``), times are ``datetime64[ns, UTC]`` (missing: ``NaT``), and ``type`` is a
categorical over every ``EventType`` value in vocabulary order, so frames of many sessions concat
without losing dtypes (``load_journals``).

``agent_id`` and ``parent_agent_id`` name the agent that emitted a row; both are missing for the
top-level agent (sub-agents fill them).
"""

from __future__ import annotations

import glob as globbing
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agent_kernel.errors import JournalError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal._event_frame import AGENT_COLUMNS, EVENT_COLUMNS, STRING, TIME, TYPE_DTYPE, events_frame, objects, utc
from agent_kernel.journal._fast import columns_from_events, columns_from_file, records_from_file, small_pages
from agent_kernel.journal._reader import KNOWN_TYPES, LineCount, events_of
from agent_kernel.journal._resume import Conversation
from agent_kernel.journal._writer import Journal

__all__ = [
    "EVENT_COLUMNS",
    "MESSAGE_COLUMNS",
    "STRING",
    "TOOL_CALL_COLUMNS",
    "TURN_COLUMNS",
    "TYPE_DTYPE",
    "USAGE_COLUMNS",
    "events_df",
    "load_journals",
    "messages_df",
    "source_events",
    "tool_calls_df",
    "turns_df",
    "usage_df",
]

TURN_COLUMNS: dict[str, Any] = {
    "session_id": STRING,
    "run_id": STRING,
    **AGENT_COLUMNS,
    "turn_counter": "int64",
    "turn_id": STRING,
    "parent_turn_id": STRING,
    "compacted": "bool",
    "start": TIME,
    "end": TIME,
    "duration_s": "float64",
    "model_s": "float64",
    "tool_s": "float64",
    "approval_wait_s": "float64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cache_read_tokens": "int64",
    "cache_write_tokens": "int64",
    "cost_usd": "float64",
    "llm_calls": "int64",
    "tool_calls": "int64",
    "ended_by": STRING,
}
TOOL_CALL_COLUMNS: dict[str, Any] = {
    "session_id": STRING,
    "run_id": STRING,
    "turn_id": STRING,
    **AGENT_COLUMNS,
    "call_id": STRING,
    "name": STRING,
    "index": "Int64",
    "arguments": STRING,
    "queued": TIME,
    "start": TIME,
    "end": TIME,
    "duration_s": "float64",
    "is_error": "boolean",
    "approval": STRING,
    "decided_by": STRING,
    "approval_wait_s": "float64",
    "result_preview": STRING,
    "overlaps": "object",
}
MESSAGE_COLUMNS: dict[str, Any] = {
    "session_id": STRING,
    "run_id": STRING,
    "turn_id": STRING,
    **AGENT_COLUMNS,
    "position": "int64",
    "seq": "int64",
    "ts": TIME,
    "role": STRING,
    "kind": STRING,
    "text": STRING,
    "blocks": "int64",
    "tool_uses": "int64",
    "tool_results": "int64",
    "chars": "int64",
    "in_context": "bool",
    "context_index": "Int64",
    "message": "object",
}
USAGE_COLUMNS: dict[str, Any] = {
    "session_id": STRING,
    "run_id": STRING,
    "turn_id": STRING,
    **AGENT_COLUMNS,
    "seq": "int64",
    "ts": TIME,
    "iteration": "int64",
    "purpose": STRING,
    "model": STRING,
    "stop_reason": STRING,
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cache_read_tokens": "int64",
    "cache_write_tokens": "int64",
    "cost_usd": "float64",
    "duration_s": "float64",
}

# Per-token events: the frames other than events_df never need them, so files skip them unparsed.
_DELTAS = (EventType.TEXT_DELTA, EventType.THINKING_DELTA, EventType.TOOL_CALL_DELTA)
_PREVIEW = 200


# -- sources -------------------------------------------------------------------------------


def _is_path(source: Any) -> bool:
    return isinstance(source, (str, os.PathLike))


def source_events(source: Any, *, skip_deltas: bool = True) -> list[AgentEvent]:
    """The events of any source the frames accept (see the module docstring), as a new list.

    Args:
        source: a journal path, a ``Journal``, events or event dicts, or an object with ``.events``.
        skip_deltas: leave out per-token deltas (cheaply, for files): the frames other than
            ``events_df`` never use them.
    """
    source = _session_source(source)
    if _is_path(source):
        records = records_from_file(source, _DELTAS if skip_deltas else ())
        count = LineCount()
        events = list(events_of(records, count))
        count.unknown_types.update(str(r["type"]) for r in records if r["type"] not in KNOWN_TYPES)
        count.warn(source, stacklevel=3)
        return events
    if isinstance(source, Journal):
        source.flush()
        return source_events(source.path, skip_deltas=skip_deltas)
    items = getattr(source, "events", source)
    if callable(items):
        items = items()
    try:
        snapshot = list(items)  # a live agent appends while we read: work on a copy
    except TypeError:
        raise JournalError(
            f"cannot read events from {type(source).__name__}; pass a journal path, a Journal, a list of "
            "events, or an object with an .events list (such as an Agent)."
        ) from None
    return [e if isinstance(e, AgentEvent) else AgentEvent.from_dict(e) for e in snapshot]


def _session_source(source: Any) -> Any:
    """A live agent's journal path once its ``EventLog`` let events go from memory, else ``source``."""
    as_source = getattr(getattr(source, "events", source), "as_source", None)
    return source if as_source is None else as_source()


def _frame(rows: dict[str, list[Any]], columns: dict[str, Any]) -> pd.DataFrame:
    """A frame with exactly ``columns`` (name -> dtype) from column lists."""
    out: dict[str, Any] = {}
    for name, dtype in columns.items():
        values = rows[name]
        if dtype is TIME:
            out[name] = utc([np.nan if v is None else v for v in values])
        elif dtype == "object":
            out[name] = objects(values)
        elif dtype == "float64":
            out[name] = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
        elif dtype in ("int64", "bool"):
            out[name] = np.asarray(values, dtype=dtype)
        else:
            out[name] = pd.array(values, dtype=dtype)
    return pd.DataFrame(out, columns=list(columns))


# -- events_df -------------------------------------------------------------------------------


def events_df(source: Any) -> pd.DataFrame:
    """One row per event.

    Columns: ``seq`` int64, ``ts`` datetime64[ns, UTC], ``session_id``, ``run_id``, ``turn_id``,
    ``parent_turn_id``, ``agent_id``, ``parent_agent_id`` string, ``iteration`` int64, ``type``
    category (``TYPE_DTYPE``), then one column per ``data`` key, sorted by name (a key that clashes
    with a column above is prefixed ``data_``). A data column's dtype follows its values: only
    booleans → ``boolean``; only integers → ``Int64``; numbers → ``float64``; only strings →
    ``string``; anything else (objects, arrays, mixed) → ``object`` holding the values as
    ``json.loads`` returns them. Rows without the key hold a missing value.

    A journal path is read by a vectorised reader, many times faster and leaner than
    ``pandas.read_json`` + ``json_normalize`` (figures: ``benchmarks/journal.py``). A file another
    tool re-serialised (other spacing or key order) is read by DuckDB's JSON reader instead: the
    same frame, a little slower.

    Example:
        >>> df = events_df(".agent_kernel/sessions/s_1234.jsonl")  # doctest: +SKIP
        >>> df[df.type == "tool_result"][["ts", "name", "duration_s"]]  # doctest: +SKIP
    """
    source = _session_source(source)
    if isinstance(source, Journal):
        source.flush()
        source = source.path
    with small_pages():
        columns = columns_from_file(source) if _is_path(source) else columns_from_events(source_events(source, skip_deltas=False))
        return events_frame(columns)


# -- the other frames ------------------------------------------------------------------------


def _parent_agents(events: list[AgentEvent]) -> dict[str, str | None]:
    """Maps each sub-agent's id to the agent that spawned it (from ``subagent_start`` events)."""
    return {e.data["agent_id"]: e.data.get("parent_agent_id") for e in events if e.type is EventType.SUBAGENT_START and "agent_id" in e.data}


def _agent(event: AgentEvent, parents: dict[str, str | None]) -> dict[str, Any]:
    return {"agent_id": event.agent_id, "parent_agent_id": parents.get(event.agent_id) if event.agent_id else None}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Wall time covered by at least one interval (parallel tools are not counted twice)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


class _Call:
    """What the events say about one tool call."""

    __slots__ = ("event", "call_id", "name", "index", "arguments", "queued", "start", "end", "duration", "is_error",
                 "approval", "decided_by", "approval_asked", "approval_wait", "result")

    def __init__(self, event: AgentEvent, call_id: str) -> None:
        self.event = event
        self.call_id = call_id
        self.name: str | None = None
        self.index: int | None = None
        self.arguments: Any = None
        self.queued: float | None = None
        self.start: float | None = None
        self.end: float | None = None
        self.duration: float | None = None
        self.is_error: bool | None = None
        self.approval: str | None = None
        self.decided_by: str | None = None
        self.approval_asked: float | None = None
        self.approval_wait: float | None = None
        self.result: str | None = None


def _calls(events: list[AgentEvent]) -> list[_Call]:
    # A call id is unique within its run only: a sub-agent (its own run) or a later run may
    # reuse one, as offline models do, so calls are told apart by run as well.
    calls: dict[tuple[str, str], _Call] = {}
    for event in events:
        data = event.data
        call_id = data.get("call_id")
        if not isinstance(call_id, str) or event.type not in _CALL_EVENTS:
            continue
        key = (event.run_id, call_id)
        call = calls.get(key)
        if call is None:
            call = calls[key] = _Call(event, call_id)
        name = data.get("name", data.get("tool"))
        if isinstance(name, str):
            call.name = name
        kind = event.type
        if kind is EventType.TOOL_CALL_READY:
            call.queued = event.ts
            call.arguments = data.get("arguments")
            call.index = data.get("index") if isinstance(data.get("index"), int) else call.index
        elif kind is EventType.TOOL_CALL_START and isinstance(data.get("index"), int):
            call.index = data["index"]
        elif kind is EventType.TOOL_START:
            call.start = event.ts
        elif kind is EventType.TOOL_RESULT:
            call.start = _number(data.get("started_at")) or call.start
            call.end = _number(data.get("ended_at")) or event.ts
            call.duration = _number(data.get("duration_s"))
            call.is_error = bool(data.get("is_error", False))
            content = data.get("content")
            call.result = content if isinstance(content, str) else json.dumps(content, default=str)
        elif kind is EventType.APPROVAL_REQUIRED:
            call.approval_asked = event.ts
        elif kind is EventType.APPROVAL_DECISION:
            call.approval = None if data.get("decision") is None else str(data.get("decision"))
            call.decided_by = None if data.get("decided_by") is None else str(data.get("decided_by"))
            wait = _number(data.get("wait_s"))
            if wait is None and call.approval_asked is not None:
                wait = event.ts - call.approval_asked
            call.approval_wait = wait
    for call in calls.values():
        if call.duration is None and call.start is not None and call.end is not None:
            call.duration = call.end - call.start
    return list(calls.values())


_CALL_EVENTS = frozenset(
    {
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_READY,
        EventType.APPROVAL_REQUIRED,
        EventType.APPROVAL_DECISION,
        EventType.TOOL_START,
        EventType.TOOL_PROGRESS,
        EventType.TOOL_RESULT,
    }
)


def _overlaps(calls: list[_Call], now: float) -> dict[int, list[str]]:
    """For each call (by position), the call ids whose execution overlapped it (a running call
    lasts until ``now``)."""
    spans = sorted((c.start, c.end if c.end is not None else now, i) for i, c in enumerate(calls) if c.start is not None)
    out: dict[int, list[str]] = {i: [] for i in range(len(calls))}
    for n, (_start, end, i) in enumerate(spans):
        for other_start, _other_end, j in spans[n + 1 :]:
            if other_start >= end:
                break
            out[i].append(calls[j].call_id)
            out[j].append(calls[i].call_id)
    return out


def tool_calls_df(source: Any) -> pd.DataFrame:
    """One row per tool call, in the order the calls appeared.

    Columns: ``session_id``, ``run_id``, ``turn_id``, ``agent_id``, ``parent_agent_id``,
    ``call_id``, ``name`` string; ``index`` Int64 (position in the model's response);
    ``arguments`` string (JSON); ``queued`` (the call was complete in the stream), ``start``,
    ``end`` datetime64[ns, UTC]; ``duration_s`` float64; ``is_error`` boolean (missing while
    running or if the run was killed); ``approval`` (the decision), ``decided_by`` string;
    ``approval_wait_s`` float64; ``result_preview`` string (the first 200 characters);
    ``overlaps`` object (list of the call_ids whose execution overlapped this one).
    """
    events = source_events(source)
    parents = _parent_agents(events)
    calls = _calls(events)
    now = events[-1].ts if events else 0.0
    overlaps = _overlaps(calls, now)
    rows: dict[str, list[Any]] = {name: [] for name in TOOL_CALL_COLUMNS}
    for position, call in enumerate(calls):
        event = call.event
        values = {
            "session_id": event.session_id,
            "run_id": event.run_id,
            "turn_id": event.turn_id,
            **_agent(event, parents),
            "call_id": call.call_id,
            "name": call.name,
            "index": call.index,
            "arguments": None if call.arguments is None else json.dumps(call.arguments, ensure_ascii=False, default=str),
            "queued": call.queued,
            "start": call.start,
            "end": call.end,
            "duration_s": call.duration,
            "is_error": call.is_error,
            "approval": call.approval,
            "decided_by": call.decided_by,
            "approval_wait_s": call.approval_wait,
            "result_preview": None if call.result is None else call.result[:_PREVIEW],
            "overlaps": overlaps[position],
        }
        for name, value in values.items():
            rows[name].append(value)
    return _frame(rows, TOOL_CALL_COLUMNS)


_TURN_ENDS = {
    EventType.RECURSION: "recursion",
    EventType.MAX_ITERATIONS_REACHED: "max_iterations",
    EventType.CANCELLED: "cancelled",
    EventType.ERROR: "error",
}


def turns_df(source: Any) -> pd.DataFrame:
    """One row per turn (one recursion of the loop), in the order the turns started.

    Columns: ``session_id``, ``run_id``, ``agent_id``, ``parent_agent_id`` string;
    ``turn_counter`` int64; ``turn_id``, ``parent_turn_id`` string; ``compacted`` bool (the
    TurnState says so, or a compaction completed in the turn); ``start``, ``end``
    datetime64[ns, UTC] (``end`` is NaT while the turn runs); ``duration_s``; ``model_s`` (model
    streaming, a compaction summary written in the turn included); ``tool_s`` (wall time with at
    least one tool running, so parallel calls count once); ``approval_wait_s``; ``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
    ``cache_write_tokens`` int64; ``cost_usd`` float64 (NaN if a price was unknown);
    ``llm_calls`` (model calls, summaries and MCP sampling included, so tokens and cost match
    ``usage_df``; a sampling call's time is in ``tool_s``, the call that asked),
    ``tool_calls`` int64; ``ended_by`` string: ``recursion`` (tools ran, the loop
    went on), the ``run_finish`` reason (``end_turn``, ``max_turns``, ...), ``max_iterations``,
    ``cancelled`` or ``error``; missing while the turn runs.
    """
    events = source_events(source)
    parents = _parent_agents(events)
    turns: dict[str, dict[str, Any]] = {}
    llm_started: dict[str, float] = {}
    for event in events:
        if event.turn_id is None:
            continue
        turn = turns.get(event.turn_id)
        if turn is None:
            turn = turns[event.turn_id] = {
                "event": event,
                "turn_counter": event.iteration,
                "parent_turn_id": event.parent_turn_id,
                "compacted": False,
                "start": event.ts,
                "end": None,
                "model_s": 0.0,
                "approval_wait_s": 0.0,
                "usage": dict.fromkeys(("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"), 0),
                "cost_usd": 0.0,
                "llm_calls": 0,
                "ended_by": None,
            }
        kind, data = event.type, event.data
        if kind is EventType.ITERATION_START and isinstance(data.get("turn_state"), dict):
            state = data["turn_state"]
            turn["turn_counter"] = int(state.get("turn_counter", event.iteration))
            turn["parent_turn_id"] = state.get("parent_turn_id", event.parent_turn_id)
            turn["compacted"] = turn["compacted"] or bool(state.get("compacted", False))
        elif kind is EventType.LLM_START or kind is EventType.COMPACTION_START:
            llm_started[event.turn_id] = event.ts
        elif _is_model_call(event):
            duration = _number(data.get("duration_s")) if kind is EventType.LLM_COMPLETE else None
            if duration is None and event.turn_id in llm_started:
                duration = event.ts - llm_started[event.turn_id]
            if kind is not EventType.MCP_SAMPLING:  # sampling runs inside a tool call: tool_s has its time
                turn["model_s"] += duration or 0.0
            turn["llm_calls"] += 1
            usage = data.get("usage") or {}
            for key in turn["usage"]:
                turn["usage"][key] += int(usage.get(key) or 0)
            cost = _number(data.get("cost_usd"))
            turn["cost_usd"] = None if cost is None or turn["cost_usd"] is None else turn["cost_usd"] + cost
        elif kind is EventType.RUN_FINISH:
            turn["ended_by"], turn["end"] = str(data.get("reason", "run_finish")), event.ts
        elif kind in _TURN_ENDS:
            turn["ended_by"], turn["end"] = _TURN_ENDS[kind], event.ts
        if kind is EventType.COMPACTION_COMPLETE:
            turn["compacted"] = True
    calls_of: dict[str | None, list[_Call]] = {}
    for call in _calls(events):
        calls_of.setdefault(call.event.turn_id, []).append(call)
    now = events[-1].ts if events else 0.0
    rows: dict[str, list[Any]] = {name: [] for name in TURN_COLUMNS}
    for turn_id, turn in turns.items():
        event = turn["event"]
        mine = calls_of.get(turn_id, [])
        spans = [(c.start, c.end if c.end is not None else now) for c in mine if c.start is not None]
        waits = [c.approval_wait for c in mine if c.approval_wait is not None]
        values = {
            "session_id": event.session_id,
            "run_id": event.run_id,
            **_agent(event, parents),
            "turn_counter": turn["turn_counter"],
            "turn_id": turn_id,
            "parent_turn_id": turn["parent_turn_id"],
            "compacted": turn["compacted"],
            "start": turn["start"],
            "end": turn["end"],
            "duration_s": None if turn["end"] is None else turn["end"] - turn["start"],
            "model_s": turn["model_s"],
            "tool_s": _union_seconds(spans),
            "approval_wait_s": float(sum(waits)),
            **turn["usage"],
            "cost_usd": turn["cost_usd"],
            "llm_calls": turn["llm_calls"],
            "tool_calls": len(mine),
            "ended_by": turn["ended_by"],
        }
        for name, value in values.items():
            rows[name].append(value)
    return _frame(rows, TURN_COLUMNS)


def _is_model_call(event: AgentEvent) -> bool:
    """A model's answer: a turn's response, a compaction summary a model wrote (it has usage), or
    a completion an MCP server asked the model for (sampling) and got."""
    kind = event.type
    return (kind is EventType.LLM_COMPLETE or (kind is EventType.COMPACTION_COMPLETE and bool(event.data.get("usage")))
            or (kind is EventType.MCP_SAMPLING and event.data.get("action") == "accept"))


def usage_df(source: Any) -> pd.DataFrame:
    """One row per model call: each ``llm_complete``, each compaction summary a model wrote, and
    each completion an MCP server asked the model for (sampling) and got.

    Columns: ``session_id``, ``run_id``, ``turn_id``, ``agent_id``, ``parent_agent_id`` string;
    ``seq`` int64; ``ts`` datetime64[ns, UTC]; ``iteration`` int64; ``purpose`` string
    (``turn``, ``compaction`` or ``sampling``); ``model``, ``stop_reason`` string (no stop reason
    for a summary); ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``
    int64; ``cost_usd`` float64 (NaN when the price is unknown); ``duration_s`` float64.
    """
    rows: dict[str, list[Any]] = {name: [] for name in USAGE_COLUMNS}
    events = source_events(source)
    parents = _parent_agents(events)
    started: dict[str | None, float] = {}  # compaction_start time per agent
    for event in events:
        if event.type is EventType.COMPACTION_START:
            started[event.agent_id] = event.ts
        if not _is_model_call(event):
            continue
        data = event.data
        usage = data.get("usage") or {}
        summary = event.type is EventType.COMPACTION_COMPLETE
        sampling = event.type is EventType.MCP_SAMPLING
        since = started.pop(event.agent_id, None) if summary else None
        values = {
            "session_id": event.session_id,
            "run_id": event.run_id,
            "turn_id": event.turn_id,
            **_agent(event, parents),
            "seq": event.seq,
            "ts": event.ts,
            "iteration": event.iteration,
            "purpose": "compaction" if summary else "sampling" if sampling else "turn",
            "model": data.get("model"),
            "stop_reason": None if summary else data.get("stop_reason"),
            "input_tokens": int(usage.get("input_tokens") or 0),
            "output_tokens": int(usage.get("output_tokens") or 0),
            "cache_read_tokens": int(usage.get("cache_read_tokens") or 0),
            "cache_write_tokens": int(usage.get("cache_write_tokens") or 0),
            "cost_usd": _number(data.get("cost_usd")),
            "duration_s": event.ts - since if since is not None else _number(data.get("duration_s")),
        }
        for name, value in values.items():
            rows[name].append(value)
    return _frame(rows, USAGE_COLUMNS)


def messages_df(source: Any) -> pd.DataFrame:
    """One row per message that entered the conversation, in order (the rebuild ``resume`` does).

    Columns: ``session_id``, ``run_id``, ``turn_id``, ``agent_id``, ``parent_agent_id`` string;
    ``position`` int64 (order of arrival); ``seq`` int64 and ``ts`` datetime64[ns, UTC] of the
    event that added it; ``role`` string (``user`` or ``assistant``); ``kind`` string
    (``prompt``, ``response``, ``tool_results``, ``summary``, ``interrupted``); ``text`` string
    (text and summary blocks joined); ``blocks``, ``tool_uses``, ``tool_results``, ``chars``
    int64; ``in_context`` bool (False once a compaction replaced it with a summary);
    ``context_index`` Int64 (its place in the conversation as it stands now, which is what a
    resumed agent holds; a summary arrives late but stands first); ``message`` object.
    """
    conversation = Conversation()
    events = source_events(source)
    parents = _parent_agents(events)
    for event in events:
        conversation.add(event)
    conversation.close_dangling()
    current = {id(entry): i for i, entry in enumerate(conversation.current)}
    rows: dict[str, list[Any]] = {name: [] for name in MESSAGE_COLUMNS}
    for position, entry in enumerate(conversation.history):
        event, message = entry.event, entry.message
        values = {
            "session_id": event.session_id,
            "run_id": event.run_id,
            "turn_id": event.turn_id,
            **_agent(event, parents),
            "position": position,
            "seq": event.seq,
            "ts": event.ts,
            "role": message.role,
            "kind": entry.kind,
            "text": message.text,
            "blocks": len(message.content),
            "tool_uses": len(message.tool_uses),
            "tool_results": len(message.tool_results),
            "chars": message.char_count(),
            "in_context": id(entry) in current,
            "context_index": current.get(id(entry)),
            "message": message,
        }
        for name, value in values.items():
            rows[name].append(value)
    return _frame(rows, MESSAGE_COLUMNS)


_FRAMES: dict[str, Callable[[Any], pd.DataFrame]] = {
    "events": events_df,
    "turns": turns_df,
    "tool_calls": tool_calls_df,
    "messages": messages_df,
    "usage": usage_df,
}


def load_journals(pattern: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], kind: str = "events") -> pd.DataFrame:
    """One frame over many journals: ``load_journals("runs/*.jsonl")``.

    Args:
        pattern: a glob pattern (``**`` recurses) or a list of paths.
        kind: which frame: ``events``, ``turns``, ``tool_calls``, ``messages`` or ``usage``.

    Returns:
        The frames concatenated in path order, with the dtypes of the single-journal frame
        (``session_id`` tells the journals apart).

    Raises:
        JournalError: no file matches, or ``kind`` is unknown.
    """
    if kind not in _FRAMES:
        raise JournalError(f"unknown frame kind {kind!r}; use one of: {', '.join(_FRAMES)}.")
    if isinstance(pattern, (str, os.PathLike)):
        paths = sorted(globbing.glob(os.fspath(pattern), recursive=True))
        if not paths:
            raise JournalError(f"no journal matches {os.fspath(pattern)!r}; check the pattern (e.g. 'runs/*.jsonl').")
    else:
        paths = [os.fspath(p) for p in pattern]
    frames = [_FRAMES[kind](Path(p)) for p in paths]
    if not frames:
        return _FRAMES[kind]([])
    return _concat(frames)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenates frames whose data columns differ, keeping each column's dtype."""
    dtypes: dict[str, Any] = {}
    for frame in frames:
        for name, dtype in frame.dtypes.items():
            dtypes.setdefault(name, dtype)
    aligned = []
    for frame in frames:
        missing = {name: pd.Series([None] * len(frame), dtype=dtype, index=frame.index)
                   for name, dtype in dtypes.items() if name not in frame.columns}
        aligned.append(frame.assign(**missing)[list(dtypes)] if missing else frame[list(dtypes)])
    return pd.concat(aligned, ignore_index=True)
