"""journal — the event journal: append (``Journal``), read, replay, resume, DataFrames, timeline.

``frames`` and ``svg_timeline`` import pandas; they load on first use so ``import agent_kernel``
stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .journal import JOURNAL_SCHEMA, SESSIONS_DIR, Journal, session_path
from .reader import TornLineWarning, read_events, read_header
from .replay import replay
from .resume import INTERRUPTED_RESULT, Resumed, list_sessions, rebuild, resolve_journal_path, turn_history

if TYPE_CHECKING:
    from .frames import events_df, load_journals, messages_df, tool_calls_df, turns_df, usage_df
    from .svg_timeline import Timeline, timeline

__all__ = [
    "INTERRUPTED_RESULT",
    "JOURNAL_SCHEMA",
    "Journal",
    "Resumed",
    "SESSIONS_DIR",
    "Timeline",
    "TornLineWarning",
    "events_df",
    "list_sessions",
    "load_journals",
    "messages_df",
    "read_events",
    "read_header",
    "rebuild",
    "replay",
    "resolve_journal_path",
    "session_path",
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
