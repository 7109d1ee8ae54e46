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

``turns_df``, ``tool_calls_df`` and ``usage_df`` are derived by ``journal.derive`` in an
in-process DuckDB: the derivation the ``sql`` views run, so a frame and its view hold the same rows.
"""

from __future__ import annotations

import glob as globbing
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from agent_kernel.errors import JournalError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal._derive import derived, event_table
from agent_kernel.journal._event_frame import AGENT_COLUMNS, STRING, TIME, events_frame, objects, utc
from agent_kernel.journal._fast import columns_from_events, columns_from_file, records_from_file, small_pages
from agent_kernel.journal._reader import KNOWN_TYPES, LineCount, events_of
from agent_kernel.journal._resume import Conversation
from agent_kernel.journal._writer import Journal

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


def _derived_frame(events: pa.Table, view: str, columns: dict[str, Any]) -> pd.DataFrame:
    """The rows of ``journal.derive``'s ``view`` over ``events`` as a frame with exactly ``columns``."""
    table = derived(events, view)
    out: dict[str, Any] = {}
    for name, dtype in columns.items():
        column = table.column(name)
        if dtype is TIME or dtype == "float64":  # times arrive as seconds since the epoch; a NULL reads as NaN
            values = column.to_numpy()
            out[name] = utc(values) if dtype is TIME else values
        elif dtype is STRING:
            out[name] = pd.arrays.ArrowStringArray(column.cast(pa.large_string()).combine_chunks())
        elif dtype in ("int64", "bool"):
            out[name] = column.to_numpy()
        else:  # nullable (Int64, boolean) and object columns
            values = column.to_pylist()
            out[name] = objects(values) if dtype == "object" else pd.array(values, dtype=dtype)
    return pd.DataFrame(out, columns=list(columns))


def tool_calls_df(source: Any) -> pd.DataFrame:
    """One row per tool call, in the order the calls appeared.

    Columns: ``session_id``, ``run_id``, ``turn_id``, ``agent_id``, ``parent_agent_id``,
    ``call_id``, ``name`` string; ``index`` Int64 (position in the model's response);
    ``arguments`` string (compact JSON); ``queued`` (the call was complete in the stream), ``start``,
    ``end`` datetime64[ns, UTC]; ``duration_s`` float64; ``is_error`` boolean (missing while
    running or if the run was killed); ``approval`` (the decision), ``decided_by`` string;
    ``approval_wait_s`` float64; ``result_preview`` string (the first 200 characters; a result
    that is not a string as compact JSON); ``overlaps`` object (list of the call_ids whose
    execution overlapped this one).
    """
    return _derived_frame(event_table(source_events(source), "tool_calls"), "tool_calls", TOOL_CALL_COLUMNS)


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
    return _derived_frame(event_table(source_events(source), "turns"), "turns", TURN_COLUMNS)


def usage_df(source: Any) -> pd.DataFrame:
    """One row per model call: each ``llm_complete``, each compaction summary a model wrote, and
    each completion an MCP server asked the model for (sampling) and got.

    Columns: ``session_id``, ``run_id``, ``turn_id``, ``agent_id``, ``parent_agent_id`` string;
    ``seq`` int64; ``ts`` datetime64[ns, UTC]; ``iteration`` int64; ``purpose`` string
    (``turn``, ``compaction`` or ``sampling``); ``model``, ``stop_reason`` string (no stop reason
    for a summary); ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``
    int64; ``cost_usd`` float64 (NaN when the price is unknown); ``duration_s`` float64.
    """
    return _derived_frame(event_table(source_events(source), "usage"), "usage", USAGE_COLUMNS)


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
    if kind in _DERIVED_COLUMNS:
        return _load_derived(paths, kind)
    frames = [_FRAMES[kind](Path(p)) for p in paths]
    if not frames:
        return _FRAMES[kind]([])
    return _concat(frames)


_DERIVED_COLUMNS = {"turns": TURN_COLUMNS, "tool_calls": TOOL_CALL_COLUMNS, "usage": USAGE_COLUMNS}
# load_journals derives this many events at once (or a journal's, if more): one DuckDB query for
# many short journals, and a bounded table for many long ones.
_BATCH_EVENTS = 500_000


def _load_derived(paths: list[str], view: str) -> pd.DataFrame:
    """The derived frame ``view`` of the journals at ``paths``, a batch of journals at a time."""
    frames: list[pd.DataFrame] = []
    batch: list[pa.Table] = []
    size = 0
    for number, path in enumerate(paths):
        batch.append(event_table(source_events(Path(path)), view, number))
        size += batch[-1].num_rows
        if size >= _BATCH_EVENTS:
            frames.append(_derived_frame(pa.concat_tables(batch), view, _DERIVED_COLUMNS[view]))
            batch, size = [], 0
    if batch or not frames:
        frames.append(_derived_frame(pa.concat_tables(batch) if batch else event_table([], view), view, _DERIVED_COLUMNS[view]))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


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
