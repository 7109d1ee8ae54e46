"""journal.derive — turns, tool calls and model calls derived from events, once, in SQL.

``turns_df``, ``tool_calls_df`` and ``usage_df`` and the SQL views ``turns``, ``tool_calls`` and
``usage`` are the same rows, so they come from one derivation: ``DERIVED_SQL``, run by DuckDB over
a table ``_all`` of events. ``sql`` fills ``_all`` from the journal files with DuckDB's own JSON
reader (fast over thousands of journals); the frames fill it from the events they were given
(``event_table``, then ``derived``), so a live agent's events and a journal give the same rows.

The relations it defines (``_turns``, ``_tool_calls``, ``_usage``) have the frames' columns in
their order, times as seconds since the epoch (the frames make nanosecond times of them, the views
microsecond ``TIMESTAMPTZ``), then ``_file`` (the journal) and ``_order`` (the rows' order within
it: the order the turns started, the calls appeared, the model answered).

DuckDB is imported when a derivation runs, never when this module is.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agent_kernel.errors import UserError
from agent_kernel.events._event import AgentEvent, EventType

if TYPE_CHECKING:
    import pyarrow as pa

#: The per-token events: no derivation reads them.
DELTA_TYPES = ("text_delta", "thinking_delta", "tool_call_delta")
#: Each derived view and the relation that holds its rows.
DERIVED = {"turns": "_turns", "tool_calls": "_tool_calls", "usage": "_usage"}
#: The columns of each derived view that are times (seconds since the epoch in the relation).
TIME_COLUMNS = {"turns": ("start", "end"), "tool_calls": ("queued", "start", "end"), "usage": ("ts",)}

#: How much of a tool's result ``result_preview`` keeps (characters).
PREVIEW_CHARS = 200

_INSTALL = "pip install 'agent_kernel[sql]'"
_NUMBER = "('BIGINT', 'UBIGINT', 'DOUBLE', 'HUGEINT')"


def duckdb_module() -> Any:
    """The ``duckdb`` module, or a ``UserError`` that says how to install it."""
    try:
        import duckdb
    except ImportError:
        raise UserError(
            f"SQL over journals, and the turns, tool-call and usage frames, need DuckDB, which is not installed; run: {_INSTALL}"
        ) from None
    return duckdb


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _fields(rows: str, keys: tuple[str, ...]) -> str:
    """The rows of ``SELECT * FROM {rows}`` with each of ``data``'s top-level ``keys`` as a JSON
    column ``j_<key>`` (NULL when absent, JSON ``null`` when null): one parse of ``data`` a row,
    where reading each key with its own path parses the whole text again."""
    paths = ", ".join(_quote("$." + key) for key in keys)
    columns = ", ".join(f"_j[{n}] AS j_{key}" for n, key in enumerate(keys, 1))
    return f"(SELECT * EXCLUDE (_j), {columns} FROM (SELECT *, json_extract(data, [{paths}]) AS _j FROM {rows}))"


_CALL_EVENTS = ("_core WHERE type IN ('tool_call_start', 'tool_call_ready', 'approval_required', 'approval_decision', 'tool_start', "
                "'tool_progress', 'tool_result')")
_MODEL_EVENTS = "_core WHERE type IN ('llm_start', 'compaction_start', 'llm_complete', 'compaction_complete', 'mcp_sampling')"

# The envelope of every derived row, in the frames' order.
_WHO = "e.session_id, e.run_id, e.turn_id, e.agent_id, p.parent_agent_id"

#: The derivation, over ``_all``: ``_file`` (which journal), the envelope, ``data`` (JSON); lines
#: that are not events have a NULL ``seq``, ``ts`` or ``type``.
DERIVED_SQL = f"""
CREATE TEMP VIEW _core AS
    SELECT * FROM _all WHERE seq IS NOT NULL AND ts IS NOT NULL AND type IS NOT NULL
        AND type NOT IN ({', '.join(map(_quote, DELTA_TYPES))});

-- A JSON value as a number (NULL if it is not one); the number at a path as an integer (0 if none).
CREATE TEMP MACRO _num(j) AS CASE WHEN json_type(j) IN {_NUMBER} THEN CAST(j->>'$' AS DOUBLE) END;
CREATE TEMP MACRO _int(j, p) AS coalesce(TRY_CAST(json_extract_string(j, p) AS BIGINT), 0);

-- Each sub-agent's parent, per journal (an event names only its own agent).
CREATE TEMP VIEW _parents AS
    SELECT _file, data->>'$.agent_id' AS child, arg_max_null(data->>'$.parent_agent_id', seq) AS parent_agent_id
    FROM _core WHERE type = 'subagent_start' AND data->>'$.agent_id' IS NOT NULL GROUP BY ALL;

-- The time of the last event in each journal: "now" for a call or a turn still running.
CREATE TEMP VIEW _now AS SELECT _file, arg_max(ts, seq) AS now FROM _core GROUP BY ALL;

-- One row per tool call: (journal, run, call id). A call id is unique within its run only: a
-- sub-agent (its own run) or a later run may reuse one, as offline models do. Each value is read
-- from the events of the type that carries it.
CREATE TEMP VIEW _call_rows AS
    SELECT _file, seq, ts, session_id, run_id, turn_id, agent_id, type, j_call_id->>'$' AS call_id,
        CASE WHEN j_name IS NOT NULL THEN (CASE WHEN json_type(j_name) = 'VARCHAR' THEN j_name->>'$' END)
             WHEN json_type(j_tool) = 'VARCHAR' THEN j_tool->>'$' END AS _name,
        CASE WHEN type IN ('tool_call_ready', 'tool_call_start') AND json_type(j_index) IN ('BIGINT', 'UBIGINT')
             THEN j_index->>'$' END AS _index,
        CASE WHEN type = 'tool_call_ready' THEN nullif(CAST(j_arguments AS VARCHAR), 'null') END AS _arguments,
        CASE WHEN type = 'tool_result' THEN nullif(_num(j_started_at), 0) END AS _started,
        CASE WHEN type = 'tool_result' THEN coalesce(nullif(_num(j_ended_at), 0), ts) END AS _ended,
        CASE WHEN type = 'tool_result' THEN _num(j_duration_s) END AS _duration,
        CASE WHEN type = 'tool_result' THEN coalesce(TRY_CAST(j_is_error->>'$' AS BOOLEAN), false) END AS _is_error,
        CASE WHEN type = 'tool_result' THEN left(CASE WHEN json_type(j_content) = 'VARCHAR' THEN j_content->>'$'
                                                      ELSE coalesce(CAST(j_content AS VARCHAR), 'null') END, {PREVIEW_CHARS}) END AS _preview,
        CASE WHEN type = 'approval_decision' THEN j_decision->>'$' END AS _decision,
        CASE WHEN type = 'approval_decision' THEN j_decided_by->>'$' END AS _decided_by,
        CASE WHEN type = 'approval_decision' THEN _num(j_wait_s) END AS _wait
    FROM {_fields(_CALL_EVENTS, ("call_id", "name", "tool", "index", "arguments", "started_at", "ended_at", "duration_s", "is_error",
                                 "content", "decision", "decided_by", "wait_s"))}
    WHERE json_type(j_call_id) = 'VARCHAR';

CREATE TEMP VIEW _calls AS
    SELECT *,
        CASE WHEN _duration IS NOT NULL THEN _duration WHEN "start" IS NOT NULL AND "end" IS NOT NULL THEN "end" - "start" END AS duration_s,
        CASE WHEN _decided THEN coalesce(_wait, _decision_ts - _asked) END AS approval_wait_s
    FROM (
    SELECT _file, run_id, call_id,
        min(seq) AS _first,
        first(session_id ORDER BY seq) AS session_id,
        first(turn_id ORDER BY seq) AS turn_id,
        first(agent_id ORDER BY seq) AS agent_id,
        last(_name ORDER BY seq) FILTER (WHERE _name IS NOT NULL) AS name,
        last(_index ORDER BY seq) FILTER (WHERE _index IS NOT NULL)::BIGINT AS "index",
        last(_arguments ORDER BY seq) FILTER (WHERE type = 'tool_call_ready') AS arguments,
        last(ts ORDER BY seq) FILTER (WHERE type = 'tool_call_ready') AS queued,
        -- a tool_start's time, or the time its result says the tool started, whichever came last
        last(CASE WHEN type = 'tool_start' THEN ts ELSE _started END ORDER BY seq)
            FILTER (WHERE type = 'tool_start' OR _started IS NOT NULL) AS "start",
        last(_ended ORDER BY seq) FILTER (WHERE type = 'tool_result') AS "end",
        last(_duration ORDER BY seq) FILTER (WHERE type = 'tool_result') AS _duration,
        last(_is_error ORDER BY seq) FILTER (WHERE type = 'tool_result') AS is_error,
        last(_decision ORDER BY seq) FILTER (WHERE type = 'approval_decision') AS approval,
        last(_decided_by ORDER BY seq) FILTER (WHERE type = 'approval_decision') AS decided_by,
        bool_or(type = 'approval_decision') AS _decided,
        last(_wait ORDER BY seq) FILTER (WHERE type = 'approval_decision') AS _wait,
        last(ts ORDER BY seq) FILTER (WHERE type = 'approval_decision') AS _decision_ts,
        last(ts ORDER BY seq) FILTER (WHERE type = 'approval_required') AS _asked,
        last(_preview ORDER BY seq) FILTER (WHERE type = 'tool_result') AS result_preview
    FROM _call_rows GROUP BY _file, run_id, call_id);

CREATE TEMP VIEW _tool_calls AS
    WITH calls AS MATERIALIZED (SELECT * FROM _calls),
    -- Execution intervals (a call still running lasts until the journal's last event), ranked
    -- within their journal by start, then stop, then first event.
    spans AS MATERIALIZED (
        SELECT _file, run_id, call_id, "start", stop, row_number() OVER (PARTITION BY _file ORDER BY "start", stop, _first) AS _rank
        FROM (SELECT c._file, c.run_id, c.call_id, c._first, c."start", coalesce(c."end", n.now) AS stop
              FROM calls c JOIN _now n USING (_file) WHERE c."start" IS NOT NULL)),
    -- Two spans overlap when the later ranked one starts before the earlier one stops, so the
    -- spans that overlap a span ranked r and started later are those ranked r + 1 to its reach:
    -- how many of its journal's spans start before it stops (one sorted pass over starts and
    -- stops). Linear in the overlaps, where comparing every pair is quadratic in the calls.
    reaches AS (
        SELECT _file, _rank, _reach FROM (
            SELECT _file, _rank, _is_stop,
                sum(CASE WHEN _is_stop THEN 0 ELSE 1 END) OVER (PARTITION BY _file ORDER BY x, _is_stop DESC ROWS UNBOUNDED PRECEDING)::BIGINT AS _reach
            FROM (SELECT _file, _rank, "start" AS x, false AS _is_stop FROM spans UNION ALL SELECT _file, _rank, stop, true FROM spans))
        WHERE _is_stop AND _reach > _rank),
    pairs AS MATERIALIZED (SELECT _file, _rank AS a, unnest(range(_rank + 1, _reach + 1)) AS b FROM reaches),
    overlapping AS (
        SELECT me._file, me.run_id, me.call_id, list(other.call_id ORDER BY other._rank) AS overlaps
        FROM (SELECT _file, a AS me, b AS other FROM pairs UNION ALL SELECT _file, b, a FROM pairs) p
        JOIN spans me ON me._file = p._file AND me._rank = p.me
        JOIN spans other ON other._file = p._file AND other._rank = p.other
        GROUP BY ALL)
    SELECT {_WHO}, e.call_id, e.name, e."index", e.arguments, e.queued, e."start", e."end", e.duration_s, e.is_error,
           e.approval, e.decided_by, e.approval_wait_s, e.result_preview, coalesce(o.overlaps, []::VARCHAR[]) AS overlaps,
           e._file, e._first AS _order
    FROM calls e
    LEFT JOIN _parents p ON p._file = e._file AND p.child = e.agent_id
    LEFT JOIN overlapping o ON o._file = e._file AND o.run_id = e.run_id AND o.call_id = e.call_id;

-- Model calls: every llm_complete, each compaction summary a model wrote (it has usage), and each
-- completion an MCP server asked the model for and got (sampling).
CREATE TEMP VIEW _model_rows AS
    SELECT *,
        type = 'compaction_complete' AS _summary,
        type = 'compaction_complete' AND json_type(j_usage) = 'OBJECT' AND len(json_keys(j_usage)) > 0 AS _summary_with_usage,
        -- the latest llm_start or compaction_start of the turn (what the turn's model time counts from)
        last_value(CASE WHEN type IN ('llm_start', 'compaction_start') THEN ts END IGNORE NULLS) OVER (
            PARTITION BY _file, turn_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS _turn_llm_start,
        -- the latest compaction_start of the agent not yet answered by a summary (what usage counts from)
        last_value(CASE WHEN type = 'compaction_start' THEN seq END IGNORE NULLS) OVER _agent AS _cstart_seq,
        last_value(CASE WHEN type = 'compaction_start' THEN ts END IGNORE NULLS) OVER _agent AS _cstart_ts,
        last_value(CASE WHEN type = 'compaction_complete' AND json_type(j_usage) = 'OBJECT'
                        AND len(json_keys(j_usage)) > 0 THEN seq END IGNORE NULLS) OVER _agent AS _csummary_seq
    FROM {_fields(_MODEL_EVENTS, ("usage", "model", "stop_reason", "cost_usd", "duration_s", "action"))}
    WINDOW _agent AS (PARTITION BY _file, agent_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);

CREATE TEMP VIEW _model_calls AS
    SELECT *,
        CASE WHEN type = 'llm_complete' THEN coalesce(_num(j_duration_s), ts - _turn_llm_start)
             WHEN type = 'mcp_sampling' THEN 0.0  -- it ran inside a tool call, whose time tool_s has
             ELSE ts - _turn_llm_start END AS _model_s,
        _num(j_cost_usd) AS _cost,
        _int(j_usage, '$.input_tokens') AS _input_tokens,
        _int(j_usage, '$.output_tokens') AS _output_tokens,
        _int(j_usage, '$.cache_read_tokens') AS _cache_read_tokens,
        _int(j_usage, '$.cache_write_tokens') AS _cache_write_tokens
    FROM _model_rows
    WHERE type = 'llm_complete' OR _summary_with_usage OR (type = 'mcp_sampling' AND j_action->>'$' = 'accept');

CREATE TEMP VIEW _usage AS
    SELECT {_WHO}, e.seq, e.ts, e.iteration,
        CASE WHEN e._summary THEN 'compaction' WHEN e.type = 'mcp_sampling' THEN 'sampling' ELSE 'turn' END AS purpose,
        e.j_model->>'$' AS model,
        CASE WHEN e._summary THEN NULL ELSE e.j_stop_reason->>'$' END AS stop_reason,
        e._input_tokens AS input_tokens, e._output_tokens AS output_tokens,
        e._cache_read_tokens AS cache_read_tokens, e._cache_write_tokens AS cache_write_tokens,
        e._cost AS cost_usd,
        CASE WHEN e._summary AND e._cstart_seq IS NOT NULL AND e._cstart_seq > coalesce(e._csummary_seq, -1)
             THEN e.ts - e._cstart_ts ELSE _num(e.j_duration_s) END AS duration_s,
        e._file, e.seq AS _order
    FROM _model_calls e LEFT JOIN _parents p ON p._file = e._file AND p.child = e.agent_id;

-- One row per turn; a turn's TurnState is read from its iteration_start events only.
CREATE TEMP VIEW _turn_rows AS
    SELECT _file, turn_id,
        min(seq) AS _first,
        first(session_id ORDER BY seq) AS session_id,
        first(run_id ORDER BY seq) AS run_id,
        first(agent_id ORDER BY seq) AS agent_id,
        first(iteration ORDER BY seq) AS _iteration,
        first(parent_turn_id ORDER BY seq) AS _parent_turn_id,
        bool_or(_state IS NOT NULL) AS _has_state,
        last(coalesce(TRY_CAST(_state->>'$.turn_counter' AS BIGINT), iteration) ORDER BY seq) FILTER (WHERE _state IS NOT NULL) AS _counter,
        last(CASE WHEN json_exists(_state, '$.parent_turn_id') THEN _state->>'$.parent_turn_id' ELSE parent_turn_id END ORDER BY seq)
            FILTER (WHERE _state IS NOT NULL) AS _state_parent,
        coalesce(bool_or(type = 'compaction_complete' OR coalesce(TRY_CAST(_state->>'$.compacted' AS BOOLEAN), false)), false) AS compacted,
        first(ts ORDER BY seq) AS "start",
        last(ts ORDER BY seq) FILTER (WHERE type IN ('run_finish', 'recursion', 'max_iterations_reached', 'cancelled', 'error')) AS "end",
        last(CASE type WHEN 'run_finish' THEN coalesce(data->>'$.reason', 'run_finish') WHEN 'recursion' THEN 'recursion'
                  WHEN 'max_iterations_reached' THEN 'max_iterations' ELSE type END ORDER BY seq)
            FILTER (WHERE type IN ('run_finish', 'recursion', 'max_iterations_reached', 'cancelled', 'error')) AS ended_by
    FROM (SELECT *, CASE WHEN type = 'iteration_start' AND json_type(data, '$.turn_state') = 'OBJECT' THEN data->'$.turn_state' END AS _state
          FROM _core WHERE turn_id IS NOT NULL)
    GROUP BY _file, turn_id;

CREATE TEMP VIEW _turn_models AS
    SELECT _file, turn_id, coalesce(sum(_model_s), 0) AS model_s, count(*) AS llm_calls,
        sum(_input_tokens) AS input_tokens, sum(_output_tokens) AS output_tokens,
        sum(_cache_read_tokens) AS cache_read_tokens, sum(_cache_write_tokens) AS cache_write_tokens,
        CASE WHEN bool_or(_cost IS NULL) THEN NULL ELSE sum(_cost) END AS cost_usd
    FROM _model_calls WHERE turn_id IS NOT NULL GROUP BY ALL;

-- Each turn's calls, their approval waits, and the wall time with at least one of them running:
-- the union of their execution intervals (a call still running lasts until the journal's last
-- event), so parallel calls count once.
CREATE TEMP VIEW _turn_tools AS
    SELECT _file, turn_id, count(*) AS tool_calls, coalesce(sum(approval_wait_s), 0.0) AS approval_wait_s,
        coalesce(sum(CASE WHEN _reach IS NULL THEN stop - "start" WHEN stop > _reach THEN stop - greatest("start", _reach) ELSE 0 END), 0.0) AS tool_s
    FROM (SELECT *, max(stop) OVER (PARTITION BY _file, turn_id ORDER BY "start", stop ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS _reach
          FROM (SELECT c.turn_id, c._file, c."start", c.approval_wait_s, CASE WHEN c."start" IS NOT NULL THEN coalesce(c."end", n.now) END AS stop
                FROM _calls c JOIN _now n USING (_file)))
    GROUP BY ALL;

CREATE TEMP VIEW _turns AS
    SELECT e.session_id, e.run_id, e.agent_id, p.parent_agent_id,
        CASE WHEN e._has_state THEN e._counter ELSE e._iteration END AS turn_counter,
        e.turn_id,
        CASE WHEN e._has_state THEN e._state_parent ELSE e._parent_turn_id END AS parent_turn_id,
        e.compacted, e."start", e."end",
        e."end" - e."start" AS duration_s,
        coalesce(m.model_s, 0.0) AS model_s,
        coalesce(t.tool_s, 0.0) AS tool_s,
        coalesce(t.approval_wait_s, 0.0) AS approval_wait_s,
        coalesce(m.input_tokens, 0)::BIGINT AS input_tokens,
        coalesce(m.output_tokens, 0)::BIGINT AS output_tokens,
        coalesce(m.cache_read_tokens, 0)::BIGINT AS cache_read_tokens,
        coalesce(m.cache_write_tokens, 0)::BIGINT AS cache_write_tokens,
        CASE WHEN m.turn_id IS NULL THEN 0.0 ELSE m.cost_usd END AS cost_usd,
        coalesce(m.llm_calls, 0) AS llm_calls,
        coalesce(t.tool_calls, 0) AS tool_calls,
        e.ended_by,
        e._file, e._first AS _order
    FROM _turn_rows e
    LEFT JOIN _parents p ON p._file = e._file AND p.child = e.agent_id
    LEFT JOIN _turn_models m ON m._file = e._file AND m.turn_id = e.turn_id
    LEFT JOIN _turn_tools t ON t._file = e._file AND t.turn_id = e.turn_id;
"""



def _reads() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """For each derived view, the event types whose ``data`` it reads and the top-level keys it
    reads there: the types and JSON paths named in its relation and the relations that one reads.

    The derivation reads ``data`` only under a filter naming the event types it reads, so events
    given as objects carry into DuckDB only what their view reads (an ``llm_complete``'s message,
    a tool's arguments for ``usage``, never), and the table is quick to build.
    """
    statements = dict(re.findall(r"CREATE TEMP (?:VIEW|MACRO) (\w+)(.*?);", re.sub(r"--[^\n]*", "", DERIVED_SQL), re.DOTALL))
    known = {kind.value for kind in EventType}
    reads = {}
    for view, relation in DERIVED.items():
        needed, todo = set(), [relation]
        while todo:
            name = todo.pop()
            if name not in needed:
                needed.add(name)
                todo.extend(other for other in re.findall(r"\b_\w+", statements[name]) if other in statements)
        text = " ".join(statements[name] for name in needed)
        reads[view] = (frozenset(re.findall(r"'([a-z_]+)'", text)) & known, frozenset(re.findall(r"'\$\.([A-Za-z_]+)", text)))
    return reads


_READS = _reads()
_SKIPPED_TYPES = frozenset(DELTA_TYPES)
_SURROGATE = re.compile("[\ud800-\udfff]")
_COLUMNS = ("_file", "seq", "ts", "session_id", "run_id", "turn_id", "parent_turn_id", "iteration", "agent_id", "type", "data")

try:  # the C encoder, built once (json.dumps builds one per call); text as UTF-8, not \u escapes
    from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]  # private, so not in typeshed

    _encoder = c_make_encoder(None, str, encode_basestring, None, ":", ",", False, True, True)
except ImportError:  # pragma: no cover - pure-Python builds of CPython
    _encoder = None


def _encode(value: Any) -> str:
    if _encoder is None:  # pragma: no cover
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, skipkeys=True)
    return "".join(_encoder(value, 0))


def _data_text(data: dict[str, Any], keys: frozenset[str]) -> str:
    """The ``keys`` of an event's ``data``, as JSON text."""
    read = {key: value for key, value in data.items() if key in keys}
    content = read.get("content")
    if isinstance(content, str) and len(content) > PREVIEW_CHARS:
        read["content"] = content[:PREVIEW_CHARS]  # only the preview of a result is read
    return _encode(read)


def _utf8(texts: list[str | None]) -> pa.Array:
    """``texts`` as an Arrow string array; a lone surrogate (which UTF-8 cannot hold) becomes U+FFFD."""
    import pyarrow as pa

    try:
        return pa.array(texts, pa.string())
    except UnicodeEncodeError:
        return pa.array([t if t is None else _SURROGATE.sub("\ufffd", t) for t in texts], pa.string())


def event_table(events: Iterable[AgentEvent], view: str, journal: int = 0) -> pa.Table:
    """``events`` as rows of ``_all`` for ``derived(..., view)``, with the ``data`` that view reads;
    ``journal`` tells the journals of one derivation apart (a turn's or a call's id is unique
    within its journal only)."""
    import pyarrow as pa

    read_types, read_keys = _READS[view]
    columns: tuple[list[Any], ...] = tuple([] for _ in _COLUMNS[1:])
    seqs, times, sessions, runs, turns, parent_turns, iterations, agents, types, data = columns
    for e in events:
        kind = e.type.value
        if kind in _SKIPPED_TYPES:
            continue
        seqs.append(e.seq)
        times.append(e.ts)
        sessions.append(e.session_id)
        runs.append(e.run_id)
        turns.append(e.turn_id)
        parent_turns.append(e.parent_turn_id)
        iterations.append(e.iteration)
        agents.append(e.agent_id)
        types.append(kind)
        data.append(_data_text(e.data, read_keys) if kind in read_types else None)
    arrays = [
        pa.array([journal] * len(seqs), pa.int64()),
        pa.array(seqs, pa.int64()),
        pa.array(times, pa.float64()),
        *(pa.array(values, pa.string()) for values in (sessions, runs, turns, parent_turns)),
        pa.array(iterations, pa.int64()),
        pa.array(agents, pa.string()),
        pa.array(types, pa.string()),
        _utf8(data),
    ]
    return pa.Table.from_arrays(arrays, names=list(_COLUMNS))


# One connection per process holds the derivation's views: making them costs more than deriving
# a short session. Derivations take turns on it (a DuckDB connection serves one query at a time).
_connection: Any = None
_lock = threading.Lock()


def _views() -> Any:
    """This process's connection with ``DERIVED_SQL`` defined."""
    global _connection
    if _connection is None:
        con = duckdb_module().connect(":memory:")
        con.execute("SET enable_progress_bar = false")  # a frame prints nothing
        con.register("_all", event_table([], "turns"))  # the views are checked against it when made
        con.execute(DERIVED_SQL)
        con.unregister("_all")
        _connection = con
    return _connection


def _close_before_fork() -> None:
    # DuckDB does not survive a fork: a child holding a copy of an open database crashes when it
    # exits. So the connection is closed before a fork (made again when next needed), with the
    # lock held across the fork so that no derivation is under way in the parent or the child.
    global _connection
    _lock.acquire()
    if _connection is not None:
        _connection.close()
        _connection = None


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(before=_close_before_fork, after_in_parent=_lock.release, after_in_child=_lock.release)


def derived(events: pa.Table, view: str) -> pa.Table:
    """The rows of the derived ``view`` (``turns``, ``tool_calls`` or ``usage``) over ``events``
    (the ``event_table`` for ``view`` of a journal, or of several concatenated).

    The table has the view's columns in the frames' order, times as seconds since the epoch, rows
    in each journal's order, journals in the order of their numbers.
    """
    with _lock:
        con = _views()
        con.register("_all", events)
        try:
            return con.sql(f"SELECT * EXCLUDE (_file, _order) FROM {DERIVED[view]} ORDER BY _file, _order").to_arrow_table()
        finally:
            con.unregister("_all")
