"""journal.sql — SQL (DuckDB) over many journals, through views shaped like the DataFrames.

``sql(query, paths)`` reads every journal once with DuckDB's own JSON reader (explicit columns,
``ignore_errors``), keeps the rows in a table of the call's private in-memory database, defines
the views ``events``, ``turns``, ``tool_calls``, ``usage`` and ``messages`` over it, and returns
the query's result as a pandas DataFrame. The views have the columns of ``journal.frames``
(``events_df``, ``turns_df``, ``tool_calls_df``, ``usage_df``, ``messages_df``) with the same
meanings; where SQL says a thing differently, ``sql``'s docstring lists it. ``turns``,
``tool_calls`` and ``usage`` are ``journal.derive``'s relations, the very derivation the frames
run, with their times made ``TIMESTAMPTZ``.

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
from typing import TYPE_CHECKING

from agent_kernel.errors import UserError
from agent_kernel.journal._derive import DELTA_TYPES, DERIVED, DERIVED_SQL, TIME_COLUMNS
from agent_kernel.journal._derive import duckdb_module as _duckdb
from agent_kernel.journal._reader import ENVELOPE_SQL, KNOWN_TYPES, LineCount, read_json_sql
from agent_kernel.journal._sources import JournalFiles, PathsLike, journal_files, warn_skipped

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

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
#: The views a query can name.
VIEWS = ("events", "turns", "tool_calls", "usage", "messages")


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


_VIEWS_SQL = f"""
-- Seconds since the epoch to TIMESTAMPTZ, rounded to the microsecond (as the Parquet export does).
CREATE TEMP MACRO _time(x) AS timezone('UTC', make_timestamp(CAST(floor(x * 1000000 + 0.5) AS BIGINT)));

CREATE TEMP VIEW events AS
    SELECT e.seq, _time(e.ts) AS ts, e.session_id, e.run_id, e.turn_id, e.parent_turn_id, e.agent_id,
           p.parent_agent_id, e.iteration, e.type, {_common_columns()}, e.data
    FROM (SELECT *, json_extract_string(data, {_KEY_PATHS}) AS _k FROM _all
          WHERE seq IS NOT NULL AND ts IS NOT NULL AND type IS NOT NULL) e
    LEFT JOIN _parents p ON p._file = e._file AND p.child = e.agent_id;
""" + "".join(
    # The derived views: journal.derive's rows, their times as TIMESTAMPTZ.
    f"CREATE TEMP VIEW {view} AS SELECT * EXCLUDE (_file, _order) "
    f"REPLACE ({', '.join(f'_time({_ident(t)}) AS {_ident(t)}' for t in TIME_COLUMNS[view])}) FROM {relation};\n"
    for view, relation in DERIVED.items()
)


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
        con.execute(DERIVED_SQL)
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
    * ``turns``, ``tool_calls``, ``usage`` — the rows of ``turns_df``, ``tool_calls_df`` and
      ``usage_df``, column for column: one derivation (``journal.derive``) makes both, so only
      the types say things differently (times below; ``overlaps`` is a list of call ids).
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

