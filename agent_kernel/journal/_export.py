"""journal.export — journals out to other tools: partitioned Parquet, and OpenTelemetry spans.

``export_parquet`` writes the events of many journals as a Hive-partitioned Parquet dataset
(``out_dir/date=2026-11-25/<journal>-<n>.parquet``) with one stable schema, so DuckDB, Spark,
Trino, pandas or polars read it as it is. The export is incremental: a manifest in ``out_dir``
(``_manifest.json``) records each journal's path, size and modification time and the files made
from it; an unchanged journal is skipped, a changed one (a session that went on) has its files
replaced. Each journal gets its own files, so replacing one never rewrites another's.

``export_otel`` sends the runs of journals (or of a live agent) to OpenTelemetry as spans; the
span building lives in ``journal.otel``, shared with the live sink.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from agent_kernel.errors import UserError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal._reader import read_json_sql
from agent_kernel.journal._sources import PathsLike, journal_files, read_tolerant, warn_skipped
from agent_kernel.journal._sql import _KEY_PATHS, COMMON_DATA_KEYS, _ident, _quote

_ARROW = {"VARCHAR": pa.string(), "BOOLEAN": pa.bool_(), "BIGINT": pa.int64(), "DOUBLE": pa.float64()}
#: The columns of every exported file: the event envelope, the common data keys (typed as in the
#: ``events`` view of ``sql``), ``data`` as JSON text, the journal it came from, and ``date``
#: (UTC, ``YYYY-MM-DD``; the default partition, so it lives in the folder names).
PARQUET_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("session_id", pa.string()),
        ("run_id", pa.string()),
        ("turn_id", pa.string()),
        ("parent_turn_id", pa.string()),
        ("agent_id", pa.string()),
        ("iteration", pa.int64()),
        ("type", pa.string()),
        *[(key, _ARROW[kind]) for key, kind in COMMON_DATA_KEYS.items()],
        ("data", pa.string()),
        ("journal", pa.string()),
        ("date", pa.string()),
    ]
)
MANIFEST = "_manifest.json"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ENVELOPE_TEXT = ("session_id", "run_id", "turn_id", "parent_turn_id", "agent_id", "type")


@dataclass
class ParquetExport:
    """What one ``export_parquet`` call did.

    Attributes:
        exported: journals written (new or changed).
        unchanged: journals skipped because the manifest says they were exported as they are.
        events: events written.
        files: Parquet files written (relative to ``out_dir``).
        skipped_lines: lines that were not records (garbage, torn last lines).
    """

    exported: int
    unchanged: int
    events: int
    files: list[str]
    skipped_lines: int


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _typed(value: Any, kind: str) -> Any:
    if kind == "VARCHAR":
        return _text(value)
    if kind == "BOOLEAN":
        return value if isinstance(value, bool) else None
    if kind == "BIGINT":
        return value if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63 else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _table(records: list[dict[str, Any]], journal: str) -> pa.Table:
    columns: dict[str, list[Any]] = {field.name: [] for field in PARQUET_SCHEMA}
    for record in records:
        ts = record.get("ts")
        seq = record.get("seq")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not isinstance(seq, int):
            continue
        payload = record.get("data")
        data: dict[str, Any] = payload if isinstance(payload, dict) else {}
        micros = math.floor(ts * 1_000_000 + 0.5)  # the rounding the SQL views use
        columns["seq"].append(seq)
        columns["ts"].append(micros)
        for name in _ENVELOPE_TEXT:
            columns[name].append(_text(record.get(name)))
        iteration = record.get("iteration")
        columns["iteration"].append(iteration if isinstance(iteration, int) and not isinstance(iteration, bool) else 0)
        for key, kind in COMMON_DATA_KEYS.items():
            columns[key].append(_typed(data.get(key), kind))
        columns["data"].append(json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str))
        columns["journal"].append(journal)
        columns["date"].append(_EPOCH + timedelta(microseconds=micros))
    columns["ts"] = pa.array(columns["ts"], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    columns["date"] = [moment.strftime("%Y-%m-%d") for moment in columns["date"]]
    return pa.Table.from_pydict(columns, schema=PARQUET_SCHEMA)


def _journal_table(path: str) -> tuple[pa.Table, int]:
    """One journal's rows, read in Python (when DuckDB is not installed), and its bad lines."""
    records, bad = read_tolerant(path)
    return _table(records, path), bad


#: Set to False to read journals in Python even where DuckDB is installed (tests compare both).
_use_duckdb: bool | None = None


class _DuckDBReader:
    """Reads one journal at a time into the export's rows with DuckDB's JSON reader.

    Many times faster than Python for big journals (the JSON is parsed in C++ on every core); the
    rows are those the Python reader makes (same rounding of times, same typed keys).
    """

    def __init__(self, duckdb: Any) -> None:
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(
            "CREATE TEMP MACRO _time(x) AS timezone('UTC', make_timestamp(CAST(floor(x * 1000000 + 0.5) AS BIGINT)))"
        )

    @classmethod
    def or_python(cls) -> Any:
        """A reader: this one if DuckDB is installed, else ``_journal_table``."""
        try:
            import duckdb
        except ImportError:
            return _journal_table
        return cls(duckdb)

    def close(self) -> None:
        """Closes the DuckDB connection."""
        self.con.close()

    def __call__(self, path: str) -> tuple[pa.Table, int]:
        keys = ", ".join(
            f"TRY_CAST(_k[{i}] AS {kind}) AS {_ident(key)}" if kind != "VARCHAR" else f"_k[{i}] AS {_ident(key)}"
            for i, (key, kind) in enumerate(COMMON_DATA_KEYS.items(), 1)
        )
        con = self.con
        con.execute(f"CREATE OR REPLACE TEMP TABLE _lines AS SELECT * FROM {read_json_sql([path], filename=True)}")
        row = con.execute(
            "SELECT count(*) FILTER (WHERE (seq IS NULL OR ts IS NULL OR type IS NULL) AND NOT (schema IS NOT NULL AND type IS NULL)) FROM _lines"
        ).fetchall()[0]
        table = con.sql(
            f"""
            SELECT seq, _time(ts) AS ts, session_id, run_id, turn_id, parent_turn_id, agent_id, coalesce(iteration, 0) AS iteration,
                   type, {keys}, CAST(coalesce(data, '{{}}') AS VARCHAR) AS data, {_quote(path)} AS journal,
                   strftime(_time(ts), '%Y-%m-%d') AS date
            FROM (SELECT *, json_extract_string(data, {_KEY_PATHS}) AS _k FROM _lines
                  WHERE seq IS NOT NULL AND ts IS NOT NULL AND type IS NOT NULL)
            ORDER BY seq
            """
        ).to_arrow_table()
        return table.cast(PARQUET_SCHEMA), int(row[0]) if row else 0


def _read_manifest(out: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except FileNotFoundError:
        return {}
    except ValueError:
        raise UserError(f"{out / MANIFEST} is damaged (not JSON); remove it to export every journal again.") from None
    return manifest.get("journals", {}) if isinstance(manifest, dict) else {}


def _write_manifest(out: Path, journals: dict[str, Any]) -> None:
    partial = out / (MANIFEST + ".partial")
    partial.write_text(json.dumps({"version": 1, "journals": journals}, indent=1, sort_keys=True))
    partial.replace(out / MANIFEST)  # atomic: a crash leaves the old manifest or the new one


def export_parquet(paths: PathsLike, out_dir: str | os.PathLike[str], partition_by: Sequence[str] = ("date",)) -> ParquetExport:
    """Writes the events of the journals at ``paths`` to a partitioned Parquet dataset in ``out_dir``.

    The schema is ``PARQUET_SCHEMA``; partition columns live in the folder names
    (``date=2026-11-25/``), the Hive layout every engine reads:
    ``duckdb.sql("SELECT * FROM read_parquet('out/**/*.parquet', hive_partitioning=true)")``.
    Journals exported before and unchanged since (same path, size and modification time) are
    skipped; a changed journal's files are replaced. Lines that are not records are skipped
    with a ``SkippedLinesWarning``; a journal of a newer schema is refused (``journal.reader``).

    Args:
        paths: a journal path, a folder, a glob (``**`` recurses) or a list of them.
        out_dir: the dataset's folder (created).
        partition_by: columns of ``PARQUET_SCHEMA`` to partition by (``()`` for none).

    Returns:
        A ``ParquetExport`` saying what was written and what was skipped.

    Raises:
        UserError: a partition column is not in the schema, or the manifest is damaged.
        JournalError: a path does not exist, or a glob matches nothing.

    Example:
        >>> export_parquet("runs/**/*.jsonl", "lake/events")  # doctest: +SKIP
        ParquetExport(exported=1000, unchanged=0, events=10147504, ...)
    """
    import pyarrow.dataset as ds

    names = PARQUET_SCHEMA.names
    if isinstance(partition_by, str):  # partition_by="date" means the column, not its letters
        partition_by = (partition_by,)
    unknown = [c for c in partition_by if c not in names]
    if unknown:
        raise UserError(f"cannot partition by {', '.join(map(repr, unknown))}: not a column. Use columns of PARQUET_SCHEMA, such as 'date', 'session_id' or 'type'.")
    partitioning = ds.partitioning(pa.schema([PARQUET_SCHEMA.field(c) for c in partition_by]), flavor="hive") if partition_by else None
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file in the way, no permission, a read-only disk
        raise UserError(f"export_parquet cannot make the folder {os.fspath(out_dir)!r}: {error.strerror or error}. "
                        "Pass out_dir= a folder that can be written.") from error
    files = journal_files(paths)
    manifest = _read_manifest(out)
    result = ParquetExport(0, 0, 0, [], 0)
    reader = _journal_table if _use_duckdb is False else _DuckDBReader.or_python()
    layout = list(partition_by)
    try:
        for path in files.paths:
            stat = os.stat(path)
            entry = manifest.get(path)
            if (
                entry is not None
                and entry.get("size") == stat.st_size
                and entry.get("mtime_ns") == stat.st_mtime_ns
                and entry.get("partition_by") == layout
                and all((out / f).exists() for f in entry.get("files", []))
            ):
                result.unchanged += 1
                continue
            for old in entry.get("files", []) if entry else []:
                (out / old).unlink(missing_ok=True)
            table, bad = reader(path)
            result.skipped_lines += bad
            written: list[str] = []
            if table.num_rows:
                # The journal's own name prefix: a later export of it replaces exactly these files.
                tag = f"{Path(path).stem}-{hashlib.sha1(path.encode()).hexdigest()[:8]}"
                ds.write_dataset(
                    table,
                    out,
                    format="parquet",
                    partitioning=partitioning,
                    basename_template=f"{tag}-{{i}}.parquet",
                    existing_data_behavior="overwrite_or_ignore",
                    file_visitor=lambda f, into=written: into.append(os.path.relpath(f.path, out)),
                    create_dir=True,
                )
            manifest[path] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "files": sorted(written),
                              "events": table.num_rows, "skipped_lines": bad, "partition_by": layout}
            result.exported += 1
            result.events += table.num_rows
            result.files.extend(written)
    finally:
        # What was written so far is recorded, so a failed export resumes where it stopped.
        _write_manifest(out, manifest)
        close = getattr(reader, "close", None)
        if close is not None:
            close()
    warn_skipped(result.skipped_lines, files)
    return result


# -- OpenTelemetry ---------------------------------------------------------------------------


def _event_lists(source: Any) -> tuple[list[list[AgentEvent]], int]:
    """The sessions' events of ``source`` (one list per journal), and the lines skipped."""
    from agent_kernel.journal._writer import Journal

    if isinstance(source, Journal):
        source.flush()
        source = source.path
    if not isinstance(source, (str, os.PathLike)):
        items = getattr(source, "events", source)
        if isinstance(items, Iterable) and not isinstance(items, (str, bytes)):
            events = list(items)
            if all(isinstance(e, AgentEvent) for e in events):
                return [events], 0
    files = journal_files(source)
    known = {kind.value for kind in EventType}
    sessions, skipped = [], 0
    for path in files.paths:
        records, bad = read_tolerant(path, _NO_SPANS)
        skipped += bad
        events = []
        for record in records:
            if record.get("type") not in known:
                continue  # a newer version's event: no span is made of it
            try:
                events.append(AgentEvent.from_dict(record))
            except (KeyError, TypeError, ValueError):
                skipped += 1
        sessions.append(events)
    warn_skipped(skipped, files, stacklevel=4)
    return sessions, skipped


# Per-token events: no span reads them, so they are skipped unparsed.
_NO_SPANS = ("text_delta", "thinking_delta", "tool_call_delta", "tool_progress")


def export_otel(paths_or_agent: Any, tracer_provider: Any = None) -> int:
    """Sends the runs of journals, or of an agent, to OpenTelemetry as spans; returns how many.

    Spans follow the GenAI semantic conventions (``journal.otel`` lists them): ``invoke_agent``
    per run, ``chat {model}`` per model call, ``execute_tool {name}`` per tool call, sub-agents as
    children of the call that started them, timed by the events. A run cut off mid-way (a killed
    process) ends at its last event, marked ``error.type = interrupted``.

    Args:
        paths_or_agent: a journal path, folder, glob or list of them; a ``Journal``; an ``Agent``
            (or anything with ``.events``); or a list of ``AgentEvent``.
        tracer_provider: an OpenTelemetry ``TracerProvider``; None uses the global one. It is
            flushed at the end, so the spans have been handed to its exporters on return.

    Raises:
        UserError: OpenTelemetry is not installed (``pip install 'agent_kernel[otel]'``).
        JournalError: a path does not exist, or a glob matches nothing.

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider  # doctest: +SKIP
        >>> export_otel("runs/*.jsonl", TracerProvider())  # doctest: +SKIP
        42
    """
    from agent_kernel.journal._otel import SpanBuilder, tracer_of

    tracer = tracer_of(tracer_provider)
    sessions, _ = _event_lists(paths_or_agent)
    spans = 0
    for events in sessions:
        builder = SpanBuilder(tracer)
        for event in events:
            builder.feed(event)
        builder.finish()
        spans += builder.spans
    if tracer_provider is None:
        from opentelemetry import trace

        tracer_provider = trace.get_tracer_provider()
    flush = getattr(tracer_provider, "force_flush", None)
    if callable(flush):
        flush()
    return spans
