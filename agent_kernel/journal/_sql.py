"""journal.sql — SQL (DuckDB) over many journals, through views shaped like the DataFrames.

``sql(query, paths)`` reads every journal once with DuckDB's own JSON reader (explicit columns,
``ignore_errors``), keeps the rows in a table of the call's private in-memory database, defines
the views ``events``, ``turns``, ``tool_calls``, ``usage`` and ``messages`` over it, and returns
the query's result as a pandas DataFrame. The views have the columns of ``journal.frames``
(``events_df``, ``turns_df``, ``tool_calls_df``, ``usage_df``, ``messages_df``) with the same
meanings; where SQL says a thing differently, ``sql``'s docstring lists it.

Why one table per call rather than views straight over the files: the derived views (turns, tool
calls) read the events several times (sub-agent parents, tool overlaps, model timings), and a
view over ``read_json`` would parse every file again for each of those. Per-token deltas are only
kept when the query names ``events``, so a query over ``usage`` or ``tool_calls`` holds only the
few events per model call and tool call in memory. ``messages`` needs the conversation rebuilt
(compactions, interrupted calls), which is the one thing done in Python, and only when named.

DuckDB is optional (``pip install 'agent_kernel[sql]'``); importing this module does not load it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from agent_kernel.errors import UserError
from agent_kernel.journal._reader import ENVELOPE_SQL, KNOWN_TYPES, LineCount, read_json_sql
from agent_kernel.journal._sources import JournalFiles, PathsLike, journal_files, warn_skipped

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

__all__ = ["COMMON_DATA_KEYS", "DELTA_TYPES", "VIEWS", "connect", "sql"]

#: Data keys most events share, kept as typed columns beside ``data`` (name -> DuckDB type).
#: The Parquet export writes the same columns.
COMMON_DATA_KEYS: dict[str, str] = {
    "call_id": "VARCHAR",
    "name": "VARCHAR",
    "model": "VARCHAR",
    "provider": "VARCHAR",
    "text": "VARCHAR",
    "prompt": "VARCHAR",
    "reason": "VARCHAR",
    "stop_reason": "VARCHAR",
    "is_error": "BOOLEAN",
    "index": "BIGINT",
    "attempt": "BIGINT",
    "duration_s": "DOUBLE",
    "cost_usd": "DOUBLE",
}
#: The per-token events: only the ``events`` view needs them.
DELTA_TYPES = ("text_delta", "thinking_delta", "tool_call_delta")
#: The views a query can name.
VIEWS = ("events", "turns", "tool_calls", "usage", "messages")

_INSTALL = "pip install 'agent_kernel[sql]'"


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise UserError(f"SQL over journals needs DuckDB, which is not installed; run: {_INSTALL}") from None
    return duckdb


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _load(con: duckdb.DuckDBPyConnection, files: JournalFiles, with_deltas: bool) -> int:
    """Fills ``_all`` from the journals; returns how many lines were not records."""
    envelope = ", ".join(f"{_ident(n)} {k}" for n, k in ENVELOPE_SQL)
    con.execute(f"CREATE TEMP TABLE _all (_file VARCHAR, {envelope}, data JSON, _schema BIGINT)")
    if not files.paths:
        return 0
    keep = "" if with_deltas else f"WHERE type IS NULL OR type NOT IN ({', '.join(map(_quote, DELTA_TYPES))})"
    con.execute(
        f"""
        INSERT INTO _all
        SELECT filename, seq, ts, session_id, run_id, turn_id, parent_turn_id, coalesce(iteration, 0), agent_id, type,
               data, schema
        FROM {read_json_sql(files.paths, filename=True)} {keep}
        """
    )
    # A header has a schema and no type; every other line that is not an event is a bad one.
    row = con.execute(
        "SELECT count(*) FROM _all WHERE (seq IS NULL OR ts IS NULL OR type IS NULL) AND NOT (_schema IS NOT NULL AND type IS NULL)"
    ).fetchall()[0]
    return int(row[0]) if row else 0


def _unknown_types(con: duckdb.DuckDBPyConnection) -> LineCount:
    """Events of types this version does not know: kept in the tables, counted for the warning."""
    known = ", ".join(_quote(kind) for kind in sorted(KNOWN_TYPES))
    rows = con.execute(f"SELECT type, count(*) FROM _all WHERE type IS NOT NULL AND seq IS NOT NULL AND type NOT IN ({known}) GROUP BY type").fetchall()
    count = LineCount()
    count.unknown_types.update({str(kind): int(n) for kind, n in rows})
    return count


def _common_columns() -> str:
    """The typed common-key columns, from one parse of ``data`` per row (``_k``, a list)."""
    return ", ".join(
        f"TRY_CAST(e._k[{i}] AS {t}) AS {_ident(k)}" if t != "VARCHAR" else f"e._k[{i}] AS {_ident(k)}"
        for i, (k, t) in enumerate(COMMON_DATA_KEYS.items(), 1)
    )


_KEY_PATHS = "[" + ", ".join(_quote("$." + k) for k in COMMON_DATA_KEYS) + "]"


# The envelope of every derived view's rows, in the frames' order.
_WHO = "e.session_id, e.run_id, e.turn_id, e.agent_id, p.parent_agent_id"
_NUMBER = "('BIGINT', 'UBIGINT', 'DOUBLE', 'HUGEINT')"

_VIEWS_SQL = f"""
CREATE TEMP VIEW _core AS
    SELECT * FROM _all WHERE seq IS NOT NULL AND ts IS NOT NULL AND type IS NOT NULL
        AND type NOT IN ({', '.join(map(_quote, DELTA_TYPES))});

-- Seconds since the epoch to TIMESTAMPTZ, rounded to the microsecond (as the Parquet export does).
CREATE TEMP MACRO _time(x) AS timezone('UTC', make_timestamp(CAST(floor(x * 1000000 + 0.5) AS BIGINT)));
CREATE TEMP MACRO _num(j, p) AS CASE WHEN json_type(j, p) IN {_NUMBER} THEN CAST(json_extract_string(j, p) AS DOUBLE) END;
CREATE TEMP MACRO _int(j, p) AS coalesce(TRY_CAST(json_extract_string(j, p) AS BIGINT), 0);

-- Each sub-agent's parent, per journal (an event names only its own agent).
CREATE TEMP VIEW _parents AS
    SELECT _file, data->>'$.agent_id' AS child, arg_max(data->>'$.parent_agent_id', seq) AS parent_agent_id
    FROM _core WHERE type = 'subagent_start' AND data->>'$.agent_id' IS NOT NULL GROUP BY ALL;

-- The time of the last event in each journal: "now" for a call or a turn still running.
CREATE TEMP VIEW _now AS SELECT _file, arg_max(ts, seq) AS now FROM _core GROUP BY ALL;

CREATE TEMP VIEW events AS
    SELECT e.seq, _time(e.ts) AS ts, e.session_id, e.run_id, e.turn_id, e.parent_turn_id, e.agent_id,
           p.parent_agent_id, e.iteration, e.type, {_common_columns()}, e.data
    FROM (SELECT *, json_extract_string(data, {_KEY_PATHS}) AS _k FROM _all
          WHERE seq IS NOT NULL AND ts IS NOT NULL AND type IS NOT NULL) e
    LEFT JOIN _parents p ON p._file = e._file AND p.child = e.agent_id;

-- One row per tool call: (journal, run, call id), as the frames tell calls apart.
CREATE TEMP VIEW _call_rows AS
    SELECT e.*, data->>'$.call_id' AS call_id,
        CASE WHEN json_exists(data, '$.name') THEN (CASE WHEN json_type(data, '$.name') = 'VARCHAR' THEN data->>'$.name' END)
             WHEN json_type(data, '$.tool') = 'VARCHAR' THEN data->>'$.tool' END AS _name
    FROM _core e
    WHERE type IN ('tool_call_start', 'tool_call_ready', 'approval_required', 'approval_decision', 'tool_start',
                   'tool_progress', 'tool_result')
      AND json_type(data, '$.call_id') = 'VARCHAR';

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
        last(data->>'$.index' ORDER BY seq) FILTER (
            WHERE type IN ('tool_call_ready', 'tool_call_start') AND json_type(data, '$.index') IN ('BIGINT', 'UBIGINT'))::BIGINT AS "index",
        last(nullif(CAST(data->'$.arguments' AS VARCHAR), 'null') ORDER BY seq) FILTER (WHERE type = 'tool_call_ready') AS arguments,
        last(ts ORDER BY seq) FILTER (WHERE type = 'tool_call_ready') AS queued,
        coalesce(
            last(nullif(_num(data, '$.started_at'), 0) ORDER BY seq) FILTER (WHERE type = 'tool_result'),
            last(ts ORDER BY seq) FILTER (WHERE type = 'tool_start')) AS "start",
        last(coalesce(nullif(_num(data, '$.ended_at'), 0), ts) ORDER BY seq) FILTER (WHERE type = 'tool_result') AS "end",
        last(_num(data, '$.duration_s') ORDER BY seq) FILTER (WHERE type = 'tool_result') AS _duration,
        last(coalesce(TRY_CAST(data->>'$.is_error' AS BOOLEAN), false) ORDER BY seq) FILTER (WHERE type = 'tool_result') AS is_error,
        last(data->>'$.decision' ORDER BY seq) FILTER (WHERE type = 'approval_decision') AS approval,
        last(data->>'$.decided_by' ORDER BY seq) FILTER (WHERE type = 'approval_decision') AS decided_by,
        bool_or(type = 'approval_decision') AS _decided,
        last(_num(data, '$.wait_s') ORDER BY seq) FILTER (WHERE type = 'approval_decision') AS _wait,
        last(ts ORDER BY seq) FILTER (WHERE type = 'approval_decision') AS _decision_ts,
        last(ts ORDER BY seq) FILTER (WHERE type = 'approval_required') AS _asked,
        left(last(CASE WHEN json_type(data, '$.content') = 'VARCHAR' THEN data->>'$.content'
                       ELSE coalesce(CAST(data->'$.content' AS VARCHAR), 'null') END ORDER BY seq)
             FILTER (WHERE type = 'tool_result'), 200) AS result_preview
    FROM _call_rows GROUP BY _file, run_id, call_id);

-- Execution intervals (a call still running lasts until the journal's last event).
CREATE TEMP VIEW _spans AS
    SELECT c._file, c.run_id, c.call_id, c.turn_id, c._first, c."start", coalesce(c."end", n.now) AS stop
    FROM _calls c JOIN _now n USING (_file) WHERE c."start" IS NOT NULL;

CREATE TEMP VIEW _overlaps AS
    SELECT a._file, a.run_id, a.call_id, list(b.call_id ORDER BY b."start", b.stop, b._first) AS overlaps
    FROM _spans a JOIN _spans b
      ON a._file = b._file AND b."start" < a.stop AND a."start" < b.stop
     AND NOT (a.run_id = b.run_id AND a.call_id = b.call_id)
    GROUP BY ALL;

CREATE TEMP VIEW tool_calls AS
    SELECT {_WHO}, e.call_id, e.name, e."index", e.arguments, _time(e.queued) AS queued,
           _time(e."start") AS "start", _time(e."end") AS "end", e.duration_s, e.is_error, e.approval,
           e.decided_by, e.approval_wait_s, e.result_preview, coalesce(o.overlaps, []::VARCHAR[]) AS overlaps
    FROM _calls e
    LEFT JOIN _parents p ON p._file = e._file AND p.child = e.agent_id
    LEFT JOIN _overlaps o ON o._file = e._file AND o.run_id = e.run_id AND o.call_id = e.call_id;

-- Model calls: every llm_complete, each compaction summary a model wrote (it has usage), and each
-- completion an MCP server asked the model for and got (sampling).
CREATE TEMP VIEW _model_rows AS
    SELECT *,
        type = 'compaction_complete' AS _summary,
        -- the latest llm_start or compaction_start of the turn (what the turn's model time counts from)
        last_value(CASE WHEN type IN ('llm_start', 'compaction_start') THEN ts END IGNORE NULLS) OVER (
            PARTITION BY _file, turn_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS _turn_llm_start,
        -- the latest compaction_start of the agent not yet answered by a summary (what usage counts from)
        last_value(CASE WHEN type = 'compaction_start' THEN seq END IGNORE NULLS) OVER _agent AS _cstart_seq,
        last_value(CASE WHEN type = 'compaction_start' THEN ts END IGNORE NULLS) OVER _agent AS _cstart_ts,
        last_value(CASE WHEN type = 'compaction_complete' AND json_type(data, '$.usage') = 'OBJECT'
                        AND len(json_keys(data, '$.usage')) > 0 THEN seq END IGNORE NULLS) OVER _agent AS _csummary_seq
    FROM _core
    WHERE type IN ('llm_start', 'compaction_start', 'llm_complete', 'compaction_complete', 'mcp_sampling')
    WINDOW _agent AS (PARTITION BY _file, agent_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);

CREATE TEMP VIEW _model_calls AS
    SELECT *,
        CASE WHEN type = 'llm_complete' THEN coalesce(_num(data, '$.duration_s'), ts - _turn_llm_start)
             WHEN type = 'mcp_sampling' THEN 0.0  -- it ran inside a tool call, whose time tool_s has
             ELSE ts - _turn_llm_start END AS _model_s,
        _num(data, '$.cost_usd') AS _cost
    FROM _model_rows
    WHERE type = 'llm_complete'
       OR (type = 'compaction_complete' AND json_type(data, '$.usage') = 'OBJECT' AND len(json_keys(data, '$.usage')) > 0)
       OR (type = 'mcp_sampling' AND data->>'$.action' = 'accept');

CREATE TEMP VIEW usage AS
    SELECT {_WHO}, e.seq, _time(e.ts) AS ts, e.iteration,
        CASE WHEN e._summary THEN 'compaction' WHEN e.type = 'mcp_sampling' THEN 'sampling' ELSE 'turn' END AS purpose,
        e.data->>'$.model' AS model,
        CASE WHEN e._summary THEN NULL ELSE e.data->>'$.stop_reason' END AS stop_reason,
        _int(e.data, '$.usage.input_tokens') AS input_tokens,
        _int(e.data, '$.usage.output_tokens') AS output_tokens,
        _int(e.data, '$.usage.cache_read_tokens') AS cache_read_tokens,
        _int(e.data, '$.usage.cache_write_tokens') AS cache_write_tokens,
        e._cost AS cost_usd,
        CASE WHEN e._summary AND e._cstart_seq IS NOT NULL AND e._cstart_seq > coalesce(e._csummary_seq, -1)
             THEN e.ts - e._cstart_ts ELSE _num(e.data, '$.duration_s') END AS duration_s
    FROM _model_calls e LEFT JOIN _parents p ON p._file = e._file AND p.child = e.agent_id;

CREATE TEMP VIEW _turn_rows AS
    SELECT _file, turn_id,
        min(seq) AS _first,
        first(session_id ORDER BY seq) AS session_id,
        first(run_id ORDER BY seq) AS run_id,
        first(agent_id ORDER BY seq) AS agent_id,
        first(iteration ORDER BY seq) AS _iteration,
        first(parent_turn_id ORDER BY seq) AS _parent_turn_id,
        bool_or(type = 'iteration_start' AND json_type(data, '$.turn_state') = 'OBJECT') AS _has_state,
        last(coalesce(TRY_CAST(data->>'$.turn_state.turn_counter' AS BIGINT), iteration) ORDER BY seq)
            FILTER (WHERE type = 'iteration_start' AND json_type(data, '$.turn_state') = 'OBJECT') AS _counter,
        last(CASE WHEN json_exists(data, '$.turn_state.parent_turn_id') THEN data->>'$.turn_state.parent_turn_id'
                  ELSE parent_turn_id END ORDER BY seq)
            FILTER (WHERE type = 'iteration_start' AND json_type(data, '$.turn_state') = 'OBJECT') AS _state_parent,
        coalesce(bool_or(type = 'compaction_complete' OR (type = 'iteration_start'
            AND coalesce(TRY_CAST(data->>'$.turn_state.compacted' AS BOOLEAN), false))), false) AS compacted,
        first(ts ORDER BY seq) AS "start",
        last(ts ORDER BY seq) FILTER (WHERE type IN ('run_finish', 'recursion', 'max_iterations_reached', 'cancelled', 'error')) AS "end",
        last(CASE type WHEN 'run_finish' THEN coalesce(data->>'$.reason', 'run_finish') WHEN 'recursion' THEN 'recursion'
                  WHEN 'max_iterations_reached' THEN 'max_iterations' ELSE type END ORDER BY seq)
            FILTER (WHERE type IN ('run_finish', 'recursion', 'max_iterations_reached', 'cancelled', 'error')) AS ended_by
    FROM _core WHERE turn_id IS NOT NULL GROUP BY _file, turn_id;

CREATE TEMP VIEW _turn_models AS
    SELECT _file, turn_id, coalesce(sum(_model_s), 0) AS model_s, count(*) AS llm_calls,
        sum(_int(data, '$.usage.input_tokens')) AS input_tokens,
        sum(_int(data, '$.usage.output_tokens')) AS output_tokens,
        sum(_int(data, '$.usage.cache_read_tokens')) AS cache_read_tokens,
        sum(_int(data, '$.usage.cache_write_tokens')) AS cache_write_tokens,
        CASE WHEN bool_or(_cost IS NULL) THEN NULL ELSE sum(_cost) END AS cost_usd
    FROM _model_calls WHERE turn_id IS NOT NULL GROUP BY ALL;

CREATE TEMP VIEW _turn_tools AS
    SELECT _file, turn_id, count(*) AS tool_calls, coalesce(sum(approval_wait_s), 0.0) AS approval_wait_s
    FROM _calls GROUP BY ALL;

-- Wall time with at least one tool running: the union of the calls' intervals.
CREATE TEMP VIEW _turn_tool_time AS
    SELECT _file, turn_id,
        sum(CASE WHEN _reach IS NULL THEN stop - "start" WHEN stop > _reach THEN stop - greatest("start", _reach) ELSE 0 END) AS tool_s
    FROM (SELECT *, max(stop) OVER (PARTITION BY _file, turn_id ORDER BY "start", stop
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS _reach FROM _spans)
    GROUP BY ALL;

CREATE TEMP VIEW turns AS
    SELECT e.session_id, e.run_id, e.agent_id, p.parent_agent_id,
        CASE WHEN e._has_state THEN e._counter ELSE e._iteration END AS turn_counter,
        e.turn_id,
        CASE WHEN e._has_state THEN e._state_parent ELSE e._parent_turn_id END AS parent_turn_id,
        e.compacted, _time(e."start") AS "start", _time(e."end") AS "end",
        e."end" - e."start" AS duration_s,
        coalesce(m.model_s, 0.0) AS model_s,
        coalesce(tt.tool_s, 0.0) AS tool_s,
        coalesce(t.approval_wait_s, 0.0) AS approval_wait_s,
        coalesce(m.input_tokens, 0)::BIGINT AS input_tokens,
        coalesce(m.output_tokens, 0)::BIGINT AS output_tokens,
        coalesce(m.cache_read_tokens, 0)::BIGINT AS cache_read_tokens,
        coalesce(m.cache_write_tokens, 0)::BIGINT AS cache_write_tokens,
        CASE WHEN m.turn_id IS NULL THEN 0.0 ELSE m.cost_usd END AS cost_usd,
        coalesce(m.llm_calls, 0) AS llm_calls,
        coalesce(t.tool_calls, 0) AS tool_calls,
        e.ended_by
    FROM _turn_rows e
    LEFT JOIN _parents p ON p._file = e._file AND p.child = e.agent_id
    LEFT JOIN _turn_models m ON m._file = e._file AND m.turn_id = e.turn_id
    LEFT JOIN _turn_tools t ON t._file = e._file AND t.turn_id = e.turn_id
    LEFT JOIN _turn_tool_time tt ON tt._file = e._file AND tt.turn_id = e.turn_id;
"""


def _names(query: str) -> set[str]:
    """The views ``query`` may read (a word match: a false positive only costs memory)."""
    return {view for view in VIEWS if re.search(rf"\b{view}\b", query, re.IGNORECASE)}


def _register_messages(con: duckdb.DuckDBPyConnection) -> None:
    """Builds ``messages`` in Python (the conversation rebuild ``resume`` does), per journal."""
    import pandas as pd

    from agent_kernel.events._event import AgentEvent, EventType
    from agent_kernel.journal._frames import MESSAGE_COLUMNS, messages_df

    known = {kind.value for kind in EventType}
    rows = con.execute(
        "SELECT _file, seq, ts, session_id, run_id, turn_id, parent_turn_id, iteration, type, data, agent_id "
        "FROM _core ORDER BY _file, seq"
    ).fetchall()
    by_file: dict[str, list[AgentEvent]] = {}
    for file, seq, ts, session_id, run_id, turn_id, parent_turn_id, iteration, kind, data, agent_id in rows:
        if kind not in known:
            continue  # a newer version's event: the conversation does not depend on it
        payload = json.loads(data) if data is not None else {}
        by_file.setdefault(file, []).append(
            AgentEvent(seq, ts, session_id, run_id, turn_id, parent_turn_id, iteration, EventType(kind),
                       payload if isinstance(payload, dict) else {}, agent_id)
        )
    frames = [messages_df(events) for events in by_file.values()]
    frame = pd.concat(frames, ignore_index=True) if frames else messages_df([])
    frame = frame.astype({name: "object" for name in ("message",)})
    frame["message"] = [json.dumps(m.to_dict(), ensure_ascii=False) for m in frame["message"]]
    assert list(frame.columns) == list(MESSAGE_COLUMNS)
    con.register("_messages_frame", frame)
    con.execute("CREATE TEMP VIEW messages AS SELECT * EXCLUDE (message), message::JSON AS message FROM _messages_frame")


def connect(paths: PathsLike, *, views: tuple[str, ...] | set[str] = VIEWS) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection holding the views over the journals at ``paths``.

    For several queries over the same journals: the files are read once. ``views`` limits what
    is prepared (``events`` keeps the per-token deltas in memory; ``messages`` is built in
    Python). Lines that are not records are skipped, and events of unknown types kept, with one
    ``SkippedLinesWarning`` counting them.

    Raises:
        UserError: DuckDB is not installed (the message says how to install it).
        JournalError: a path does not exist, a glob matches nothing, or a journal's schema is
            newer than this version reads.
    """
    duckdb = _duckdb()
    files = journal_files(paths)
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = false")  # lets the load stream in parallel with less memory
        bad = _load(con, files, with_deltas="events" in views)
        unknown = _unknown_types(con)
        con.execute(_VIEWS_SQL)
        if "messages" in views:
            _register_messages(con)
    except BaseException:
        con.close()
        raise
    warn_skipped(bad, files, unknown_types=unknown)
    return con


def sql(query: str, paths: PathsLike) -> pd.DataFrame:
    """Runs a DuckDB SQL ``query`` over the journals at ``paths`` and returns a DataFrame.

    ``paths`` is a journal path, a folder (every ``*.jsonl`` under it), a glob (``**`` recurses)
    or a list of them. The query reads these views, one row each per:

    * ``events`` — event: ``seq``, ``ts`` (TIMESTAMPTZ), ``session_id``, ``run_id``, ``turn_id``,
      ``parent_turn_id``, ``agent_id``, ``parent_agent_id``, ``iteration``, ``type``, as in
      ``events_df``; then the common data keys as typed columns (``call_id``, ``name``,
      ``model``, ``provider``, ``text``, ``prompt``, ``reason``, ``stop_reason``, ``is_error``,
      ``index``, ``attempt``, ``duration_s``, ``cost_usd``; a value of another type reads as
      NULL, a number under a text key as its text), and ``data`` (JSON) for every other key:
      ``data->>'$.key'``. ``events_df`` makes one column per data key; SQL needs its columns
      known before the files are read, so the rest stay in ``data``.
    * ``turns``, ``tool_calls``, ``usage`` — the columns of ``turns_df``, ``tool_calls_df`` and
      ``usage_df``, in their order and with their meanings. In ``tool_calls``, ``arguments`` is
      the JSON text as recorded (compact; the frame uses ``json.dumps`` spacing: parse either to
      compare), so is ``result_preview`` when the result is not a string, and ``overlaps`` is a
      list of call ids.
    * ``messages`` — the columns of ``messages_df``, ``message`` as JSON. This view is built in
      Python (the conversation rebuild ``resume`` does, compactions included), so it is the slow
      one; it is only built when the query names it.

    Times are TIMESTAMPTZ in UTC (microseconds; the frames keep nanoseconds). Rows come in no
    particular order: say ``ORDER BY``. Journals are told apart by ``session_id``. Garbage lines
    and a torn last line are skipped, and events of unknown types kept, with a
    ``SkippedLinesWarning`` that counts them; a journal of a newer schema is refused, naming it
    and the upgrade (``journal.reader``). For several queries over the same journals, ``connect`` (``from
    agent_kernel.journal._sql import connect``) reads them once.

    Args:
        query: DuckDB SQL (several statements: the last one's result is returned).
        paths: where the journals are.

    Returns:
        The result as a pandas DataFrame.

    Raises:
        UserError: DuckDB is not installed, or the query is not valid (the message says why
            and lists the views).
        JournalError: a path does not exist, or a glob matches nothing.

    Example:
        >>> from agent_kernel.journal import sql
        >>> sql("SELECT name, count(*) AS calls FROM tool_calls GROUP BY name ORDER BY calls DESC",
        ...     "runs/**/*.jsonl")  # doctest: +SKIP
    """
    duckdb = _duckdb()
    con = connect(paths, views=_names(query))
    try:
        try:
            result = con.execute(query)
        except duckdb.Error as exc:
            raise UserError(
                f"the query failed: {exc}. The views are {', '.join(VIEWS)}; list a view's columns with "
                "sql('DESCRIBE turns', paths)."
            ) from None
        if result is None or result.description is None:  # an empty query, a comment, or a statement with no rows (SET, ...)
            raise UserError(f"the query {query.strip()[:60]!r} returns no table; write a SELECT, e.g. sql('SELECT * FROM turns', paths).")
        return result.df()
    finally:
        con.close()

