"""journal — the event journal: append (``Journal``), read, replay, resume, DataFrames, timeline;
two runs side by side (``diff_runs``, drawn by ``diff_view``); SQL over many journals (``sql``), Parquet and OpenTelemetry
export.

``frames``, ``svg_timeline`` and ``export`` import pandas, pyarrow or OpenTelemetry; they load on
first use, and ``sql`` imports DuckDB only when a query runs, so ``import agent_kernel`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .diff import diff_runs
from .html_diff import RunDiff, diff_view
from .journal import JOURNAL_SCHEMA, SESSIONS_DIR, Journal, rewrite_journal, session_path
from .reader import TornLineWarning, read_events, read_header
from .replay import replay
from .resume import INTERRUPTED_RESULT, Resumed, list_sessions, rebuild, resolve_journal_path, turn_history
from .sources import SkippedLinesWarning

# Eager: a lazy load would leave the submodule, not the function, under the name ``sql``. The
# module imports neither DuckDB nor pandas until a query runs.
from .sql import sql

if TYPE_CHECKING:
    from .export import export_otel, export_parquet
    from .frames import events_df, load_journals, messages_df, tool_calls_df, turns_df, usage_df
    from .svg_timeline import Timeline, timeline

__all__ = [
    "INTERRUPTED_RESULT",
    "JOURNAL_SCHEMA",
    "Journal",
    "Resumed",
    "RunDiff",
    "SESSIONS_DIR",
    "SkippedLinesWarning",
    "Timeline",
    "TornLineWarning",
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
    "replay",
    "resolve_journal_path",
    "rewrite_journal",
    "session_path",
    "sql",
    "timeline",
    "tool_calls_df",
    "turn_history",
    "turns_df",
    "usage_df",
]

_LAZY = {
    "events_df": "frames",
    "load_journals": "frames",
    "messages_df": "frames",
    "tool_calls_df": "frames",
    "turns_df": "frames",
    "usage_df": "frames",
    "export_otel": "export",
    "export_parquet": "export",
    # Not a module named "timeline": importing it would replace the function on this package.
    "Timeline": "svg_timeline",
    "timeline": "svg_timeline",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
