"""journal — the event journal: append (``Journal``), read, replay, resume, DataFrames, timeline;
two runs side by side (``diff_runs``, drawn by ``diff_view``); SQL over many journals (``sql``), Parquet and OpenTelemetry
export.

``frames``, ``svg_timeline`` and ``export`` import pandas, pyarrow or OpenTelemetry; they load on
first use, and DuckDB is imported only when a query or a derived frame (turns, tool calls, usage)
runs, so ``import agent_kernel`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_kernel.journal._diff import diff_runs
from agent_kernel.journal._html_diff import RunDiff, diff_view
from agent_kernel.journal._reader import SkippedLinesWarning, TornLineWarning, read_events, read_header
from agent_kernel.journal._replay import replay
from agent_kernel.journal._resume import (
    INTERRUPTED_RESULT,
    ReplacedRequest,
    Resumed,
    list_sessions,
    rebuild,
    replaced_requests,
    resolve_journal_path,
    turn_history,
)

# Eager: a lazy load would leave the submodule, not the function, under the name ``sql``. The
# module imports neither DuckDB nor pandas until a query runs.
from agent_kernel.journal._sql import connect, sql
from agent_kernel.journal._writer import JOURNAL_SCHEMA, SESSIONS_DIR, Journal, JournalLostWarning, session_path

if TYPE_CHECKING:
    from agent_kernel.journal._export import export_otel, export_parquet
    from agent_kernel.journal._frames import events_df, load_journals, messages_df, tool_calls_df, turns_df, usage_df
    from agent_kernel.journal._svg_timeline import Timeline, timeline

__all__ = [
    "INTERRUPTED_RESULT",
    "JOURNAL_SCHEMA",
    "Journal",
    "JournalLostWarning",
    "ReplacedRequest",
    "Resumed",
    "RunDiff",
    "SESSIONS_DIR",
    "SkippedLinesWarning",
    "Timeline",
    "TornLineWarning",
    "connect",
    "diff_runs",
    "diff_view",
    "events_df",
    "export_otel",
    "export_parquet",
    "list_sessions",
    "load_journals",
    "messages_df",
    "read_events",
    "read_header",
    "rebuild",
    "replaced_requests",
    "replay",
    "resolve_journal_path",
    "session_path",
    "sql",
    "timeline",
    "tool_calls_df",
    "turn_history",
    "turns_df",
    "usage_df",
]

_LAZY = {
    "events_df": "_frames",
    "load_journals": "_frames",
    "messages_df": "_frames",
    "tool_calls_df": "_frames",
    "turns_df": "_frames",
    "usage_df": "_frames",
    "export_otel": "_export",
    "export_parquet": "_export",
    "Timeline": "_svg_timeline",
    "timeline": "_svg_timeline",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
